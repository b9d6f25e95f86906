# Sourced at the start of every command on the H200 machine (Ubuntu 24.04, CUDA 13, no
# OpenBLAS, cJSON, PCRE2 or pkg-config, and no way to install): unpacks the Debian packages
# carried in .deb/ (fetched here with scripts/h200/fetch-debs) into a private prefix and
# points the build at them.
set -e
TERN_PFX=/tmp/tern-pfx
if [ ! -d "$TERN_PFX" ]; then
    mkdir -p "$TERN_PFX"
    for f in .deb/*.deb; do dpkg -x "$f" "$TERN_PFX"; done
fi
lib=$TERN_PFX/usr/lib/x86_64-linux-gnu
export PATH=$TERN_PFX/usr/bin:$PATH
export PKG_CONFIG_SYSROOT_DIR=$TERN_PFX
export PKG_CONFIG_PATH=$lib/openblas-pthread/pkgconfig:$lib/pkgconfig
export PKG_CONFIG_LIBDIR=$lib/pkgconfig:/usr/lib/x86_64-linux-gnu/pkgconfig:/usr/share/pkgconfig
export LD_LIBRARY_PATH=$lib/openblas-pthread:$lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TERN_SHARED_DIR=$PWD/.fixtures
set +e
