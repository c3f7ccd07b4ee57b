// A loaded .ptn program: its manifest (graph, cache spec, tokenizer, golden samples) and its
// tensors, viewed in place in the memory-mapped file (or held in memory while exporting).
#pragma once
#include <map>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "formats/ptn_file.h"
#include "runtime/manifest.h"

namespace ptn {

class Program {
 public:
  // Cheap: header, bounds and manifest; Full: also every tensor checksum.
  static std::shared_ptr<const Program> load(const std::string& path, VerifyLevel level = VerifyLevel::Cheap);
  // A program whose tensors live in memory (the exporter computes golden samples on it).
  static std::shared_ptr<const Program> from_memory(ProgramMeta meta, std::map<std::string, Tensor> tensors,
                                                    std::string name);

  const ProgramMeta& meta() const { return meta_; }
  const Graph& graph() const { return meta_.graph; }
  const std::string& name() const { return name_; }
  bool has_tensor(const std::string& n) const { return tensors_.count(n) != 0; }
  const Tensor& tensor(const std::string& n) const;  // throws Corrupt naming the tensor when absent
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  const PtnFile* file() const { return file_.get(); }

 private:
  ProgramMeta meta_;
  std::map<std::string, Tensor> tensors_;
  std::shared_ptr<PtnFile> file_;
  std::string name_;
};

}  // namespace ptn
