#include "builtins/formats/mapped_file.hpp"
#include "builtins/formats/format_error.hpp"
#include <c10/core/CPUAllocator.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace purple::formats {

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    ::close(fd);
    fail(S_ISDIR(st.st_mode) ? "is a directory" : "cannot read its size");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    // MAP_PRIVATE + PROT_WRITE: pages are shared with the page cache until someone writes to one.
    void* p = ::mmap(nullptr, size_t(st.st_size), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      f->data_ = static_cast<uint8_t*>(p);
      f->size_ = uint64_t(st.st_size);
      f->mapped_ = true;
      ::close(fd);
      return f;
    }
  }
  // Not mappable (a pipe, /proc, an empty file): read it.
  // The chunk lives on the heap: a 64 KB array made this frame 64 KB, and an interpreter on a
  // small thread stack (144 KB, 64 KB of it free) died here in torch-load, whatever the file.
  std::string buf;
  std::vector<char> chunk(size_t(1) << 16);
  for (;;) {
    ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      fail(std::string("read failed: ") + std::strerror(errno));
    }
    if (n == 0) break;
    buf.append(chunk.data(), size_t(n));
  }
  ::close(fd);
  f->size_ = buf.size();
  f->data_ = static_cast<uint8_t*>(std::malloc(buf.size() ? buf.size() : 1));
  if (!f->data_) throw std::bad_alloc();
  std::memcpy(f->data_, buf.data(), buf.size());
  return f;
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(data_, size_t(size_));
  else std::free(data_);
}

namespace {
void releaseMapping(void* ctx) { delete static_cast<std::shared_ptr<MappedFile>*>(ctx); }
}  // namespace

c10::Storage MappedFile::storage(const std::shared_ptr<MappedFile>& file, uint64_t offset, uint64_t n, size_t alignment) {
  uint8_t* p = file->data_ + offset;
  if (alignment > 1 && reinterpret_cast<uintptr_t>(p) % alignment != 0) return copiedStorage(p, n);
  auto* keep = new std::shared_ptr<MappedFile>(file);
  c10::DataPtr ptr(p, keep, releaseMapping, c10::Device(c10::kCPU));
  return c10::Storage(c10::Storage::use_byte_size_t(), size_t(n), std::move(ptr), nullptr, false);
}

c10::Storage copiedStorage(const void* bytes, uint64_t n) {
  c10::Storage s(c10::Storage::use_byte_size_t(), size_t(n), c10::GetCPUAllocator(), true);
  if (n) std::memcpy(s.data_ptr().get(), bytes, size_t(n));
  return s;
}

}  // namespace purple::formats
