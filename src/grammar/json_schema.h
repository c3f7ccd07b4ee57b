// JSON Schema -> GBNF, for the subset OpenAI's structured outputs (strict mode) allows, and the
// generic "any JSON object" grammar of response_format {"type": "json_object"}.
//
// Supported (docs/grammar.md lists it with examples):
//   type: object (properties, required, additionalProperties false; or additionalProperties a
//         schema and no properties: a map), array (items, minItems, maxItems <= 1000),
//         string (minLength, maxLength <= 10000, format date / time / date-time / uuid),
//         number, integer (minimum, maximum, exclusiveMinimum, exclusiveMaximum: the grammar
//         holds exactly the integers in range), boolean, null, and a list of types;
//   enum, const, anyOf, $ref to "#", "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed),
//   the annotations title, description, default, examples, $comment, $schema, $id, strict.
// Everything else (pattern, bounds on a non-integer number, oneOf, allOf, not, patternProperties, ...) is
// refused with a ptn::Error (InvalidArgument) naming the keyword and its JSON pointer, never
// ignored. Optional properties may be left out but keep the order of `properties`.
//
// Whitespace: after '{', '[', ',', ':' and after each value, at most one space or one newline
// followed by up to 20 spaces. Numbers have at most 16 integer digits, 16 fraction digits and a
// 2-digit exponent (so a double holds them); strings never hold a lone surrogate escape: every
// generated string is valid JSON and parses back to the same kind of value.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "grammar/grammar.h"

namespace ptn::grammar {

// The GBNF text for `schema` (root rule "root"). Properties are generated in the order of the
// schema's `properties`: pass the schema as text or as an ordered_json (a plain nlohmann::json
// keeps its keys sorted, so its properties come out in alphabetical order).
std::string json_schema_to_gbnf(std::string_view schema_text);
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
std::string json_schema_to_gbnf(const nlohmann::json& schema);
// The GBNF text of any JSON object (root rule "root").
std::string json_object_gbnf();

// For grammars that embed several schemas (tool calls): the rules of `schema` alone, its root
// rule named `root_name` ([a-z0-9-], not "ws" or "json-..."; every other rule's name starts with
// it), with no trailing whitespace and without the primitives, which json_primitives_gbnf()
// defines once for all of them.
std::string json_schema_rules(const nlohmann::ordered_json& schema, const std::string& root_name);
std::string json_primitives_gbnf();

// Both compiled (parse_gbnf of the text above).
Grammar json_schema_grammar(std::string_view schema_text);
Grammar json_schema_grammar(const nlohmann::ordered_json& schema);
Grammar json_object_grammar();

}  // namespace ptn::grammar
