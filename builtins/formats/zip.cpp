#include "builtins/formats/zip.hpp"
#include "builtins/formats/format_error.hpp"
#include <algorithm>
#include <cstring>
#include <zlib.h>

namespace purple::formats {

namespace {

uint16_t u16(const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); }
uint32_t u32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }
uint64_t u64(const uint8_t* p) { return uint64_t(u32(p)) | uint64_t(u32(p + 4)) << 32; }

uint32_t crc32Of(const void* data, uint64_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {
    uInt chunk = uInt(std::min<uint64_t>(n, 1u << 30));
    c = crc32(c, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return uint32_t(c);
}

constexpr uint64_t kMiB = 1024 * 1024;

// An entry name every reader resolves the same way: relative, without `..`, backslashes (a folder
// separator on Windows, a character elsewhere), drive letters or NUL bytes.
void checkName(const std::string& name) {
  auto bad = [&](const char* why) { fail("entry \"" + name + "\" " + why + ": refusing an archive that readers may unpack differently"); };
  if (name.empty()) bad("has an empty name");
  if (name.find('\0') != std::string::npos) bad("has a NUL byte in its name");
  if (name.find('\\') != std::string::npos) bad("has a backslash in its name");
  if (name[0] == '/') bad("has an absolute path");
  if (name.size() >= 2 && name[1] == ':') bad("has a drive letter");
  for (size_t p = 0; p <= name.size();) {
    size_t q = name.find('/', p);
    if (q == std::string::npos) q = name.size();
    if (name.compare(p, q - p, "..") == 0 && q - p == 2) bad("has a `..` component");
    p = q + 1;
  }
}

// The local header must say what the central directory says: the same name, the same method
// and the same sizes -- or, when the sizes follow the data (flag bit 3, as torch.save writes),
// zero sizes there and a data descriptor after the data that agrees. Otherwise a reader walking
// the local headers and one reading the directory see different archives. Returns where the
// entry's record ends (after its data and data descriptor).
uint64_t checkLocalHeader(const uint8_t* d, uint64_t fileSize, const ZipReader::Entry& e) {
  const uint8_t* h = d + e.headerOffset;
  uint64_t avail = fileSize - e.headerOffset;
  uint16_t flags = u16(h + 6), method = u16(h + 8), nameLen = u16(h + 26), extraLen = u16(h + 28);
  auto differs = [&](const std::string& what) {
    fail("corrupt or hostile archive: the local header of entry " + e.name + " and the central directory disagree on its " + what +
         " (refusing an archive that two readers would read differently)");
  };
  if (30 + uint64_t(nameLen) > avail || std::string(reinterpret_cast<const char*>(h + 30), nameLen) != e.name) differs("name");
  if (method != e.method) differs("compression method");
  uint64_t csize = u32(h + 18), usize = u32(h + 22);
  if (csize == 0xFFFFFFFF || usize == 0xFFFFFFFF) {   // zip64: the values are in the local extra field
    const uint8_t* x = h + 30 + nameLen;
    uint64_t left = std::min<uint64_t>(extraLen, avail - 30 - nameLen);
    bool found = false;
    while (left >= 4) {
      uint16_t id = u16(x), len = u16(x + 2);
      if (4 + uint64_t(len) > left) break;
      if (id == 0x0001) {
        uint64_t q = 0;
        if (usize == 0xFFFFFFFF && q + 8 <= len) usize = u64(x + 4 + q), q += 8;
        if (csize == 0xFFFFFFFF && q + 8 <= len) csize = u64(x + 4 + q), q += 8;
        found = true;
        break;
      }
      x += 4 + len;
      left -= 4 + len;
    }
    if (!found) differs("sizes (a zip64 local header without its zip64 field)");
  }
  if (!(flags & 8)) {
    if (csize != e.compressedSize || usize != e.size) differs("sizes");
    return e.dataOffset + e.compressedSize;
  }
  if ((csize || usize) && (csize != e.compressedSize || usize != e.size)) differs("sizes");
  // The data descriptor: an optional signature, the CRC, then 4-byte sizes (8-byte in zip64).
  uint64_t p = e.dataOffset + e.compressedSize;
  if (p + 4 <= fileSize && u32(d + p) == 0x08074b50) p += 4;
  if (p + 12 <= fileSize && u32(d + p) == e.crc && u32(d + p + 4) == e.compressedSize && u32(d + p + 8) == e.size) return p + 12;
  if (p + 20 <= fileSize && u32(d + p) == e.crc && u64(d + p + 4) == e.compressedSize && u64(d + p + 12) == e.size) return p + 20;
  differs("CRC or sizes (its data descriptor is missing or says otherwise)");
  return p;
}

// The bytes between the records the central directory lists (and before the directory) must
// hold no local file header: an entry the directory leaves out is one that a reader walking the
// local headers (a streaming unzip) sees and a reader of the directory does not.
void checkNoHiddenEntries(const uint8_t* d, uint64_t from, uint64_t to) {
  for (uint64_t p = from; p + 4 <= to; p++)
    if (d[p] == 'P' && u32(d + p) == 0x04034b50)
      fail("corrupt or hostile archive: a local file entry at byte " + std::to_string(p) +
           " is not in the central directory (refusing an archive that two readers would read differently)");
}

}  // namespace

bool ZipReader::looksLikeZip(const MappedFile& f) {
  return f.size() >= 4 && u32(f.data()) == 0x04034b50;
}

ZipReader::ZipReader(std::shared_ptr<MappedFile> file) : file_(std::move(file)) {
  const uint8_t* d = file_->data();
  uint64_t size = file_->size();
  if (size < 22) fail("not a zip archive (too short: " + std::to_string(size) + " bytes)");
  // The end-of-central-directory record is in the last 64 KB + 22 bytes.
  uint64_t eocd = UINT64_MAX;
  uint64_t lowest = size > 65557 ? size - 65557 : 0;
  for (uint64_t p = size - 22;; p--) {
    if (u32(d + p) == 0x06054b50 && p + 22 + u16(d + p + 20) <= size) {
      eocd = p;
      break;
    }
    if (p == lowest) break;
  }
  if (eocd == UINT64_MAX) fail("not a zip archive, or truncated (no end-of-central-directory record)");
  uint64_t count = u16(d + eocd + 10), cdSize = u32(d + eocd + 12), cdOffset = u32(d + eocd + 16);
  // One archive on one disk, as torch.save writes and torch.load (miniz) insists on: a disk
  // number other than 0 is corruption (miniz also accepts 1 and 1, which some writers put there).
  uint16_t thisDisk = u16(d + eocd + 4), cdDisk = u16(d + eocd + 6);
  if ((thisDisk | cdDisk) != 0 && !(thisDisk == 1 && cdDisk == 1))
    fail("corrupt end-of-central-directory record (it names disks " + std::to_string(thisDisk) + " and " +
         std::to_string(cdDisk) + "; split archives are not read)");
  if (count == 0xFFFF || cdSize == 0xFFFFFFFF || cdOffset == 0xFFFFFFFF) {
    if (eocd < 20 || u32(d + eocd - 20) != 0x07064b50) fail("zip64 archive without its zip64 locator (truncated or corrupt)");
    uint64_t z = u64(d + eocd - 20 + 8);
    if (z > size - 56 || u32(d + z) != 0x06064b50) fail("corrupt zip64 end-of-central-directory record");
    count = u64(d + z + 32);
    cdSize = u64(d + z + 40);
    cdOffset = u64(d + z + 48);
  }
  if (cdOffset > size || cdSize > size - cdOffset) fail("corrupt central directory (it points past the end of the file: truncated?)");
  if (count > cdSize / 46) fail("corrupt central directory (" + std::to_string(count) + " entries cannot fit)");
  uint64_t p = cdOffset, end = cdOffset + cdSize;
  for (uint64_t i = 0; i < count; i++) {
    if (p + 46 > end || u32(d + p) != 0x02014b50) fail("corrupt central directory entry " + std::to_string(i));
    Entry e;
    uint16_t flags = u16(d + p + 8);
    e.method = u16(d + p + 10);
    e.crc = u32(d + p + 16);
    e.compressedSize = u32(d + p + 20);
    e.size = u32(d + p + 24);
    uint16_t nameLen = u16(d + p + 28), extraLen = u16(d + p + 30), commentLen = u16(d + p + 32);
    e.headerOffset = u32(d + p + 42);
    uint16_t disk = u16(d + p + 34);
    if (disk != thisDisk && disk != 1)
      fail("corrupt central directory entry " + std::to_string(i) + " (it starts on disk " + std::to_string(disk) +
           "; split archives are not read)");
    if (p + 46 + nameLen + extraLen + commentLen > end) fail("corrupt central directory entry " + std::to_string(i));
    e.name.assign(reinterpret_cast<const char*>(d + p + 46), nameLen);
    // zip64 extra field: the 64-bit values of the fields set to 0xFFFFFFFF, in this order.
    for (uint64_t x = p + 46 + nameLen, xend = x + extraLen; x + 4 <= xend;) {
      uint16_t id = u16(d + x), len = u16(d + x + 2);
      if (x + 4 + len > xend) break;
      if (id == 0x0001) {
        uint64_t q = x + 4, qend = q + len;
        auto take = [&](uint64_t& field) {
          if (field != 0xFFFFFFFF) return;
          if (q + 8 > qend) fail("corrupt zip64 field in entry " + e.name);
          field = u64(d + q);
          q += 8;
        };
        take(e.size);
        take(e.compressedSize);
        take(e.headerOffset);
      }
      x += 4 + len;
    }
    p += 46 + nameLen + extraLen + commentLen;
    if (flags & 1) fail("entry " + e.name + " is encrypted");
    if (e.method != 0 && e.method != 8)
      fail("entry " + e.name + " uses compression method " + std::to_string(e.method) + " (only stored and deflated are read)");
    if (e.method == 0 && e.size != e.compressedSize) fail("entry " + e.name + " is stored but its two sizes differ");
    if (e.headerOffset > size || size - e.headerOffset < 30 || u32(d + e.headerOffset) != 0x04034b50)
      fail("entry " + e.name + " has no local header where the directory says (truncated or corrupt)");
    uint64_t data = e.headerOffset + 30 + u16(d + e.headerOffset + 26) + u16(d + e.headerOffset + 28);
    if (data > size || e.compressedSize > size - data)
      fail("entry " + e.name + " runs past the end of the file (truncated: the file has " + std::to_string(size) + " bytes)");
    e.dataOffset = data;
    e.endOffset = checkLocalHeader(d, size, e);
    checkName(e.name);
    // One deflate stream expands at most ~1032 times; refuse big claims far past what the
    // compressed bytes can honestly hold.
    if (e.method == 8 && e.size > 64 * kMiB && e.size / 200 > e.compressedSize)
      fail("entry " + e.name + " claims " + std::to_string(e.size) + " bytes from " + std::to_string(e.compressedSize) +
           " compressed ones: refusing a probable zip bomb");
    if (!byName_.emplace(e.name, entries_.size()).second) fail("entry " + e.name + " appears twice");
    entries_.push_back(std::move(e));
  }
  // Entries that share bytes are the other way to make a zip bomb.
  std::vector<const Entry*> sorted;
  for (auto& e : entries_) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) { return a->headerOffset < b->headerOffset; });
  for (size_t i = 1; i < sorted.size(); i++)
    if (sorted[i]->headerOffset < sorted[i - 1]->dataOffset + sorted[i - 1]->compressedSize)
      fail("entries " + sorted[i - 1]->name + " and " + sorted[i]->name + " overlap: refusing a probable zip bomb");
  uint64_t from = 0;
  for (const Entry* e : sorted) {
    if (e->headerOffset > from) checkNoHiddenEntries(d, from, e->headerOffset);
    from = std::max(from, e->endOffset);
  }
  if (cdOffset > from) checkNoHiddenEntries(d, from, cdOffset);
}

const ZipReader::Entry* ZipReader::find(const std::string& name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : &entries_[it->second];
}

void ZipReader::checkCrc(const Entry& e, const void* data, uint64_t n) const {
  if (crc32Of(data, n) != e.crc) fail("entry " + e.name + " is corrupt (its CRC does not match)");
}

std::string ZipReader::read(const Entry& e) const {
  const uint8_t* src = file_->data() + e.dataOffset;
  std::string out;
  if (e.method == 0) {
    out.assign(reinterpret_cast<const char*>(src), size_t(e.size));
  } else {
    out.resize(size_t(e.size));
    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) fail("zlib failed to start");
    // Output never goes past the declared size: a stream that wants more is corrupt (or a bomb).
    uint64_t inLeft = e.compressedSize, outLeft = e.size;
    const uint8_t* in = src;
    uint8_t* outp = reinterpret_cast<uint8_t*>(&out[0]);
    int rc;
    for (;;) {
      if (z.avail_in == 0 && inLeft) {
        z.next_in = const_cast<Bytef*>(in);
        z.avail_in = uInt(std::min<uint64_t>(inLeft, 1u << 30));
        in += z.avail_in;
        inLeft -= z.avail_in;
      }
      if (z.avail_out == 0 && outLeft) {
        z.next_out = outp;
        z.avail_out = uInt(std::min<uint64_t>(outLeft, 1u << 30));
        outp += z.avail_out;
        outLeft -= z.avail_out;
      }
      rc = inflate(&z, Z_NO_FLUSH);
      if (rc != Z_OK) break;
    }
    uint64_t outDone = e.size - outLeft - z.avail_out;
    inflateEnd(&z);
    if (rc != Z_STREAM_END || outDone != e.size) fail("entry " + e.name + " is corrupt (its compressed data does not inflate to its size)");
  }
  checkCrc(e, out.data(), out.size());
  return out;
}

c10::Storage ZipReader::storage(const Entry& e, size_t alignment, bool mayAlias) const {
  if (e.method != 0) {
    std::string bytes = read(e);
    return copiedStorage(bytes.data(), bytes.size());
  }
  const uint8_t* src = file_->data() + e.dataOffset;
  checkCrc(e, src, e.size);
  if (mayAlias) return MappedFile::storage(file_, e.dataOffset, e.size, alignment);
  return copiedStorage(src, e.size);
}

// ---- writing ---------------------------------------------------------------------------------

namespace {
void le16(std::string& s, uint16_t v) { s.push_back(char(v)), s.push_back(char(v >> 8)); }
void le32(std::string& s, uint32_t v) { le16(s, uint16_t(v)), le16(s, uint16_t(v >> 16)); }
void le64(std::string& s, uint64_t v) { le32(s, uint32_t(v)), le32(s, uint32_t(v >> 32)); }
constexpr uint64_t k32 = 0xFFFFFFFF;
}  // namespace

namespace {
// A raw deflate stream of DATA (zip's method 8), fed in pieces small enough for zlib's 32-bit counts.
std::string deflated(const void* data, uint64_t n) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) fail("zlib failed to start");
  std::string out;
  const uint8_t* in = static_cast<const uint8_t*>(data);
  uint64_t left = n;
  std::vector<char> buf(1 << 16);
  for (;;) {
    if (z.avail_in == 0 && left) {
      uInt piece = uInt(std::min<uint64_t>(left, uint64_t(1) << 30));
      z.next_in = const_cast<Bytef*>(in);
      z.avail_in = piece;
      in += piece;
      left -= piece;
    }
    z.next_out = reinterpret_cast<Bytef*>(buf.data());
    z.avail_out = uInt(buf.size());
    int rc = deflate(&z, left == 0 && z.avail_in == 0 ? Z_FINISH : Z_NO_FLUSH);
    if (rc == Z_STREAM_ERROR) {
      deflateEnd(&z);
      fail("zlib failed to compress");
    }
    out.append(buf.data(), buf.size() - z.avail_out);
    if (rc == Z_STREAM_END) break;
  }
  deflateEnd(&z);
  return out;
}
}  // namespace

void ZipWriter::add(const std::string& name, const void* data, uint64_t n, bool deflate) {
  uint32_t crc = crc32Of(data, n);
  std::string packed;
  if (deflate) packed = deflated(data, n);
  const void* body = deflate ? static_cast<const void*>(packed.data()) : data;
  uint64_t csize = deflate ? packed.size() : n;
  uint16_t method = deflate ? 8 : 0;
  bool big = n >= k32 || csize >= k32;
  std::string h;
  le32(h, 0x04034b50);
  le16(h, big ? 45 : 20);
  le16(h, 0);   // flags
  le16(h, method);
  le16(h, 0), le16(h, 0);   // time, date
  le32(h, crc);
  le32(h, big ? uint32_t(k32) : uint32_t(csize));
  le32(h, big ? uint32_t(k32) : uint32_t(n));
  le16(h, uint16_t(name.size()));
  std::string extra;
  if (big) {
    le16(extra, 0x0001), le16(extra, 16), le64(extra, n), le64(extra, csize);
  }
  if (!deflate) {
    // PyTorch's "FB" padding field puts every entry's data at a multiple of 64 bytes.
    uint64_t base = offset_ + 30 + name.size() + extra.size() + 4;
    uint16_t pad = uint16_t((64 - base % 64) % 64);
    le16(extra, 0x4246), le16(extra, pad);
    extra.append(pad, 'Z');
  }
  le16(h, uint16_t(extra.size()));
  h += name;
  h += extra;
  written_.push_back({name, crc, method, csize, n, offset_});
  put(h.data(), h.size());
  if (csize) put(body, size_t(csize));
}

void ZipWriter::finish() {
  uint64_t cdStart = offset_;
  for (auto& w : written_) {
    bool big = w.size >= k32 || w.compressedSize >= k32, far = w.offset >= k32;
    std::string extra;
    if (big || far) {
      le16(extra, 0x0001), le16(extra, uint16_t((big ? 16 : 0) + (far ? 8 : 0)));
      if (big) le64(extra, w.size), le64(extra, w.compressedSize);
      if (far) le64(extra, w.offset);
    }
    std::string c;
    le32(c, 0x02014b50);
    le16(c, big || far ? 45 : 20), le16(c, big || far ? 45 : 20);
    le16(c, 0), le16(c, w.method), le16(c, 0), le16(c, 0);
    le32(c, w.crc);
    le32(c, big ? uint32_t(k32) : uint32_t(w.compressedSize));
    le32(c, big ? uint32_t(k32) : uint32_t(w.size));
    le16(c, uint16_t(w.name.size())), le16(c, uint16_t(extra.size())), le16(c, 0);
    le16(c, 0), le16(c, 0), le32(c, 0);
    le32(c, far ? uint32_t(k32) : uint32_t(w.offset));
    c += w.name;
    c += extra;
    put(c.data(), c.size());
  }
  uint64_t cdSize = offset_ - cdStart, count = written_.size();
  std::string e;
  if (count >= 0xFFFF || cdSize >= k32 || cdStart >= k32) {
    uint64_t z = offset_;
    le32(e, 0x06064b50), le64(e, 44), le16(e, 45), le16(e, 45), le32(e, 0), le32(e, 0);
    le64(e, count), le64(e, count), le64(e, cdSize), le64(e, cdStart);
    le32(e, 0x07064b50), le32(e, 0), le64(e, z), le32(e, 1);
  }
  bool z64 = !e.empty();
  le32(e, 0x06054b50), le16(e, 0), le16(e, 0);
  le16(e, z64 ? 0xFFFF : uint16_t(count)), le16(e, z64 ? 0xFFFF : uint16_t(count));
  le32(e, z64 ? uint32_t(k32) : uint32_t(cdSize)), le32(e, z64 ? uint32_t(k32) : uint32_t(cdStart));
  le16(e, 0);
  put(e.data(), e.size());
}

}  // namespace purple::formats
