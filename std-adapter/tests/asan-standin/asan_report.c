/*
 * asan_report.c: a stand-in for the host AddressSanitizer runtime's __asan_report_nonself_error
 * (LLVM compiler-rt; the signature as compiler-rt's AMDGPU nonself tests and ROCclr declare it),
 * for tests/sanitizer_asan.rs. It prints every argument on one line of stderr and returns (the
 * real one prints a report and dies when is_abort). Built as a shared library and loaded with
 * RTLD_GLOBAL, so that dlsym(RTLD_DEFAULT, ...) finds it as it finds a linked ASan runtime.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

void __asan_report_nonself_error(uint64_t *callstack, uint32_t n_callstack, uint64_t *addrs, uint32_t n_addrs,
                                 uint64_t *tids, uint32_t n_tids, bool is_write, uint32_t access_size, bool is_abort,
                                 const char *name, int64_t vma_adjust, int fd, uint64_t file_extent_size,
                                 uint64_t file_extent_start) {
  struct stat st;
  long long fd_size = fd >= 0 && fstat(fd, &st) == 0 ? (long long)st.st_size : -1;
  fprintf(stderr, "asan-standin: callstack=");
  for (uint32_t i = 0; i < n_callstack; i++) fprintf(stderr, "%s%#llx", i ? "," : "", (unsigned long long)callstack[i]);
  fprintf(stderr, " n_callstack=%u addrs=", n_callstack);
  for (uint32_t i = 0; i < n_addrs; i++) fprintf(stderr, "%s%#llx", i ? "," : "", (unsigned long long)addrs[i]);
  fprintf(stderr, " n_addrs=%u ids=", n_addrs);
  for (uint32_t i = 0; i < n_tids; i++) fprintf(stderr, "%s%llu", i ? "," : "", (unsigned long long)tids[i]);
  fprintf(stderr,
          " n_ids=%u is_write=%d access_size=%u is_abort=%d name=%s vma_adjust=%lld fd_open=%d fd_size=%lld"
          " extent_size=%llu extent_start=%llu\n",
          n_tids, is_write, access_size, is_abort, name, (long long)vma_adjust, fd >= 0 && fcntl(fd, F_GETFD) != -1,
          fd_size, (unsigned long long)file_extent_size, (unsigned long long)file_extent_start);
  fflush(stderr);
}
