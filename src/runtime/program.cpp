#include "runtime/program.h"

#include "core/error.h"

namespace ptn {

std::shared_ptr<const Program> Program::load(const std::string& path, VerifyLevel level) {
  auto file = PtnFile::open(path, level);
  auto p = std::make_shared<Program>();
  p->file_ = file;
  p->name_ = path;
  for (const auto& n : file->tensor_names()) p->tensors_.emplace(n, file->tensor(n));
  p->meta_ = meta_from_json(file->manifest(), p->tensors_, path);
  return p;
}

std::shared_ptr<const Program> Program::from_memory(ProgramMeta meta, std::map<std::string, Tensor> tensors,
                                                    std::string name) {
  auto p = std::make_shared<Program>();
  p->meta_ = std::move(meta);
  p->tensors_ = std::move(tensors);
  p->name_ = std::move(name);
  return p;
}

const Tensor& Program::tensor(const std::string& n) const {
  auto it = tensors_.find(n);
  if (it == tensors_.end()) fail(ErrorKind::Corrupt, name_, "tensor '" + n + "' is missing");
  return it->second;
}

}  // namespace ptn
