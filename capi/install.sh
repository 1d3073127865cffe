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
#   LIBDIR/cmake/hostcall/hostcallConfig.cmake, hostcallConfigVersion.cmake
#                                         find_package(hostcall) and the targets hostcall::hostcall
#                                         (shared) and hostcall::hostcall_static
#   LIBDIR/.debug/libhostcall_capi.so.X.Y.Z.debug   the shared library's debug info, which the
#                                         installed library names (.gnu_debuglink) and no longer holds
#
# (From 1.0 on the SONAME is libhostcall_capi.so.X; see capi/build.rs.)
#
# The build runs in a target directory of its own (target/install) with the builder's paths
# (CARGO_HOME, the checkout) remapped, so that none is embedded in the libraries.
#
# Usage: capi/install.sh [--prefix DIR] [--libdir DIR] [--includedir DIR] [--destdir DIR]
#                        [--profile release|dev] [--no-build]
#   --prefix      default /usr/local; --libdir default PREFIX/lib; --includedir PREFIX/include
#   --destdir     staging root prepended to every path written (the .pc and .cmake files still
#                 name PREFIX)
#   --profile     the cargo profile to build and install (default release)
#   --no-build    install what target/install already holds for the profile
set -eu

usage() {
  # This file's opening comment, from its first line to "set -eu", without the "# ".
  sed -n '2,/^set -eu$/p' "$0" | sed -e '/^set -eu$/d' -e 's/^# \{0,1\}//'
}

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
    -h|--help) usage; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done
libdir=${libdir:-$prefix/lib}
includedir=${includedir:-$prefix/include}

cd "$(dirname "$0")"

# The crate's version, and the target directory cargo builds into: one of its own, as its
# RUSTFLAGS differ from every other build's (sharing one would rebuild both every time).
version=$(cargo pkgid -p hostcall-capi | sed 's/.*[@#]//')
workspace_target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
workspace_root=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"workspace_root":"\([^"]*\)".*/\1/p')
target_dir=$workspace_target/install
cargo_home=${CARGO_HOME:-$HOME/.cargo}
case "$profile" in
  dev) built=$target_dir/debug ;;
  *) built=$target_dir/$profile ;;
esac
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
if [ "$major" = 0 ]; then abi=0.$minor; else abi=$major; fi

if [ "$build" = yes ]; then
  # The builder's paths, as they appear in panic locations and debug info, become fixed names.
  remap="--remap-path-prefix=$cargo_home=/cargo --remap-path-prefix=$workspace_root=/hostcall"
  RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }$remap" CARGO_TARGET_DIR=$target_dir \
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
# The debug info goes to its own file, which the installed library names (gdb finds it there).
mkdir -p "$lib/.debug"
so=$lib/libhostcall_capi.so.$version
debug=$lib/.debug/libhostcall_capi.so.$version.debug
objcopy --only-keep-debug "$built/libhostcall_capi.so" "$debug"
chmod 644 "$debug"
objcopy --strip-debug --strip-unneeded "--add-gnu-debuglink=$debug" "$built/libhostcall_capi.so" "$so"
chmod 755 "$so"
ln -sf "libhostcall_capi.so.$version" "$lib/libhostcall_capi.so.$abi"
ln -sf "libhostcall_capi.so.$abi" "$lib/libhostcall_capi.so"
install -m 644 "$built/libhostcall_capi.a" "$lib/libhostcall_capi.a"
strip --strip-debug "$lib/libhostcall_capi.a"
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

# The CMake package: imported targets for the shared and the static library.
cmake_dir=$lib/cmake/hostcall
mkdir -p "$cmake_dir"
cmake_libs=$(printf '%s' "$native_static_libs" | sed -e 's/-l//g' -e 's/ /;/g')
sed -e "s|@PREFIX@|$prefix|g" -e "s|@LIBDIR@|$libdir|g" -e "s|@INCLUDEDIR@|$includedir|g" \
  -e "s|@VERSION@|$version|g" -e "s|@ABI@|$abi|g" -e "s|@NATIVE_LIBS@|$cmake_libs|g" \
  cmake/hostcallConfig.cmake.in > "$cmake_dir/hostcallConfig.cmake"
sed -e "s|@VERSION@|$version|g" cmake/hostcallConfigVersion.cmake.in > "$cmake_dir/hostcallConfigVersion.cmake"
chmod 644 "$cmake_dir/hostcallConfig.cmake" "$cmake_dir/hostcallConfigVersion.cmake"

echo "installed hostcall $version: $lib/libhostcall_capi.{so.$version,so.$abi,so,a}, $inc/hostcall.h, $lib/pkgconfig/hostcall{,-static}.pc, $cmake_dir/hostcallConfig{,Version}.cmake"
