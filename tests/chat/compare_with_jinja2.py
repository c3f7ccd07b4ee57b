#!/usr/bin/env python3
"""Renders the chat fixtures of tests/data/chat with Python Jinja2 set up the way transformers'
apply_chat_template sets it up (sandboxed, trim_blocks, lstrip_blocks, loop controls, a
`generation` tag, tojson with ensure_ascii=False, raise_exception, strftime_now) and reports
where Python's render differs from the stored @huggingface/jinja reference renders.

A developer tool, not a CI test: it needs the `jinja2` Python package.
Usage: python3 tests/chat/compare_with_jinja2.py [-v]
"""
import json
import sys
from datetime import datetime
from pathlib import Path

from jinja2 import nodes
from jinja2.exceptions import TemplateError
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

DATA = Path(__file__).resolve().parent.parent / "data" / "chat"


class GenerationTag(Extension):
    """`{% generation %}...{% endgeneration %}` renders its body (transformers uses it to mark
    assistant tokens)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.If(nodes.Const(True), body, [], [], lineno=lineno)


class RaisedError(Exception):
    pass


def raise_exception(message):
    raise RaisedError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def render(env, source, context):
    try:
        return "ok", env.from_string(source).render(**context)
    except RaisedError as e:
        return "error", str(e)
    except (TemplateError, TypeError, ValueError, AttributeError, KeyError, IndexError) as e:
        return "error", f"{type(e).__name__}: {e}"


def expected(name):
    ok = DATA / "expected" / f"{name}.txt"
    if ok.exists():
        return "ok", ok.read_text(encoding="utf-8")
    return "error", (DATA / "expected" / f"{name}.error.txt").read_text(encoding="utf-8")


def main():
    verbose = "-v" in sys.argv
    env = make_env()
    same = differ = 0
    templates = json.loads((DATA / "templates.json").read_text(encoding="utf-8"))
    sets = sorted((DATA / "messages").glob("*.json"))
    cases = []
    for tname, t in templates.items():
        source = (DATA / t["file"]).read_text(encoding="utf-8")
        for set_path in sets:
            s = json.loads(set_path.read_text(encoding="utf-8"))
            for gen in (False, True):
                ctx = dict(messages=s["messages"], tools=s.get("tools"), documents=None,
                           add_generation_prompt=gen, bos_token=t["bos_token"], eos_token=t["eos_token"])
                ctx.update(s.get("extra", {}))
                cases.append((f"{tname}__{set_path.stem}__gen{int(gen)}", source, ctx))
    for c in json.loads((DATA / "engine_cases.json").read_text(encoding="utf-8")):
        cases.append((f"engine__{c['name']}", c["template"], c["context"]))
    for name, source, ctx in cases:
        got = render(env, source, ctx)
        want = expected(name)
        if got == want or (got[0] == want[0] == "error"):
            same += 1
            continue
        differ += 1
        print(f"differs: {name}")
        if verbose:
            print(f"  python:    {got[0]}: {got[1]!r}")
            print(f"  reference: {want[0]}: {want[1]!r}")
    print(f"{same} same, {differ} differ")


if __name__ == "__main__":
    main()
