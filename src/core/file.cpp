#include "core/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace ptn {

static std::string errno_text() { return std::strerror(errno); }

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ErrorKind::Io, path, "cannot open: " + errno_text());
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    fail(ErrorKind::Io, path, "cannot stat: " + errno_text());
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorKind::Io, path, "not a regular file");
  }
  auto mf = std::shared_ptr<MappedFile>(new MappedFile());
  mf->path_ = path;
  mf->size_ = static_cast<size_t>(st.st_size);
  if (mf->size_ > 0) {
    void* p = mmap(nullptr, mf->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      fail(ErrorKind::Io, path, "cannot mmap: " + errno_text());
    }
    mf->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return mf;
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

std::string read_text_file(const std::string& path, size_t max_bytes) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail(ErrorKind::Io, path, "cannot open: " + errno_text());
  std::string s;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    if (s.size() + n > max_bytes) {
      std::fclose(f);
      fail(ErrorKind::Corrupt, path, "larger than the limit of " + std::to_string(max_bytes) + " bytes");
    }
    s.append(buf, n);
  }
  bool err = std::ferror(f);
  std::fclose(f);
  if (err) fail(ErrorKind::Io, path, "read error");
  return s;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

FileWriter::FileWriter(const std::string& path) : path_(path), tmp_(path + ".tmp") {
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) fail(ErrorKind::Io, tmp_, "cannot create: " + errno_text());
}

FileWriter::~FileWriter() {
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

void FileWriter::write(const void* data, size_t n) {
  if (n && std::fwrite(data, 1, n, f_) != n) fail(ErrorKind::Io, tmp_, "write failed: " + errno_text());
  pos_ += n;
}

void FileWriter::pad_to(uint64_t alignment) {
  static const uint8_t zeros[4096] = {};
  uint64_t target = (pos_ + alignment - 1) / alignment * alignment;
  while (pos_ < target) write(zeros, static_cast<size_t>(std::min<uint64_t>(sizeof zeros, target - pos_)));
}

void FileWriter::commit() {
  if (std::fflush(f_) != 0 || std::fclose(f_) != 0) {
    f_ = nullptr;
    std::remove(tmp_.c_str());
    fail(ErrorKind::Io, tmp_, "cannot flush: " + errno_text());
  }
  f_ = nullptr;
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    fail(ErrorKind::Io, path_, "cannot rename into place: " + errno_text());
}

}  // namespace ptn
