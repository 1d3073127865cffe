#!/bin/sh
# Installs the C library of hostcall (the `hostcall-capi` crate) for C and C++ programs:
#
#   LIBDIR/libhostcall_capi.so.X.Y.Z      the shared library, whose SONAME is libhostcall_capi.so.0.Y
#   LIBDIR/libhostcall_capi.so.0.Y        -> libhostcall_capi.so.X.Y.Z (the name programs load)
#   LIBDIR/libhostcall_capi.so            -> libhostcall_capi.so.0.Y   (the name -lhostcall_capi finds)
#   LIBDIR/libhostcall_capi.a             the static library
#   INCLUDEDIR/hostcall.h, hostcall_cuda.cuh, hostcall_cuda_rpc.cuh
#   LIBDIR/pkgconfig/hostcall.pc          cc prog.c $(pkg-config --cflags --libs hostcall)
#   LIBDIR/pkgconfig/hostcall-static.pc   cc prog.c $(pkg-config --cflags --libs hostcall-static)
#
# (From 1.0 on the SONAME is libhostcall_capi.so.X; see capi/build.rs.)
#
# Usage: capi/install.sh [--prefix DIR] [--libdir DIR] [--includedir DIR] [--destdir DIR]
#                        [--profile release|dev] [--no-build]
#   --prefix      default /usr/local; --libdir default PREFIX/lib; --includedir PREFIX/include
#   --destdir     staging root prepended to every path written (the .pc files still name PREFIX)
#   --profile     the cargo profile to build and install (default release)
#   --no-build    install what the profile's target directory already holds
set -eu

prefix=/usr/local
libdir=
includedir=
destdir=
profile=release
build=yes
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --libdir) libdir=$2; shift 2 ;;
    --includedir) includedir=$2; shift 2 ;;
    --destdir) destdir=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --no-build) build=no; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done
libdir=${libdir:-$prefix/lib}
includedir=${includedir:-$prefix/include}

cd "$(dirname "$0")"

# The crate's version, and the target directory cargo builds into.
version=$(cargo pkgid -p hostcall-capi | sed 's/.*[@#]//')
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
case "$profile" in
  dev) built=$target_dir/debug ;;
  *) built=$target_dir/$profile ;;
esac
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
if [ "$major" = 0 ]; then abi=0.$minor; else abi=$major; fi

if [ "$build" = yes ]; then
  cargo build -p hostcall-capi --profile "$profile"
fi
for file in libhostcall_capi.so libhostcall_capi.a; do
  [ -f "$built/$file" ] || { echo "install.sh: $built/$file not found (build it, or drop --no-build)" >&2; exit 1; }
done

# The native libraries the static library needs on Linux (glibc), from
#   cargo rustc -p hostcall-capi --crate-type staticlib -- --print native-static-libs
native_static_libs="-ldl -lgcc_s -lutil -lrt -lpthread -lm -lc"

lib=$destdir$libdir
inc=$destdir$includedir
mkdir -p "$lib/pkgconfig" "$inc"
install -m 755 "$built/libhostcall_capi.so" "$lib/libhostcall_capi.so.$version"
ln -sf "libhostcall_capi.so.$version" "$lib/libhostcall_capi.so.$abi"
ln -sf "libhostcall_capi.so.$abi" "$lib/libhostcall_capi.so"
install -m 644 "$built/libhostcall_capi.a" "$lib/libhostcall_capi.a"
# `-L` so a symlink is installed as the file it names (capi/include links to ../include).
for header in hostcall.h hostcall_cuda.cuh hostcall_cuda_rpc.cuh; do
  cp -L "include/$header" "$inc/$header"
  chmod 644 "$inc/$header"
done

pc_head="prefix=$prefix
libdir=$libdir
includedir=$includedir
"
printf '%s\n' "$pc_head" "Name: hostcall" \
  "Description: GPU hostcalls (AMD ROCm's protocol) served on the host: ROCm's rochostcall.hpp interface and hostcall_* (shared library)" \
  "Version: $version" \
  "Libs: -L\${libdir} -lhostcall_capi" \
  "Libs.private: $native_static_libs" \
  "Cflags: -I\${includedir}" > "$lib/pkgconfig/hostcall.pc"
printf '%s\n' "$pc_head" "Name: hostcall-static" \
  "Description: GPU hostcalls (AMD ROCm's protocol) served on the host: ROCm's rochostcall.hpp interface and hostcall_* (static library)" \
  "Version: $version" \
  "Libs: \${libdir}/libhostcall_capi.a $native_static_libs" \
  "Cflags: -I\${includedir}" > "$lib/pkgconfig/hostcall-static.pc"

echo "installed hostcall $version: $lib/libhostcall_capi.{so.$version,so.$abi,so,a}, $inc/hostcall.h, $lib/pkgconfig/hostcall{,-static}.pc"
