#!/usr/bin/env bash
# Packs what `taskwire-bench` needs into one tarball, to measure on a Linux x86-64
# machine that can download nothing (a large machine lent for the scaling table):
# the release `taskwire` and `taskwire-bench` (stripped), this machine's nats-server,
# its newest Debian Postgres (bin, lib and share, in their relative layout, so that
# Postgres finds its share dir) and the shared libraries they load beyond glibc's.
#
#   scripts/bench-bundle.sh [OUT]     (default: $CARGO_TARGET_DIR or target, /bench-bundle.tar.xz)
#
# There, as root: `tar xJf bench-bundle.tar.xz && bench-bundle/run.sh --only scaling`.
# `run.sh` adds the `postgres` user the private Postgres runs as, registers the bundled
# libraries with the loader (`su` drops LD_LIBRARY_PATH), and runs `taskwire-bench`
# with the bundled binaries and servers; its arguments go to `taskwire-bench`.
set -euo pipefail

target=${CARGO_TARGET_DIR:-target}
out=${1:-$target/bench-bundle.tar.xz}
release=$target/release
for bin in taskwire taskwire-bench; do
  [ -x "$release/$bin" ] || {
    echo "bench-bundle: $release/$bin is missing: cargo build --release --locked -p taskwire-cli -p taskwire-bench" >&2
    exit 1
  }
done
nats=$(command -v nats-server) || { echo "bench-bundle: nats-server is not on PATH" >&2; exit 1; }
pg_lib=$(ls -d /usr/lib/postgresql/*/ 2>/dev/null | sort -V | tail -1)
[ -n "$pg_lib" ] || { echo "bench-bundle: no /usr/lib/postgresql/<version>" >&2; exit 1; }
version=$(basename "$pg_lib")

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/bench-bundle
mkdir -p "$root/bin" "$root/libs" "$root/usr/lib/postgresql" "$root/usr/share/postgresql"
install -m 755 "$release/taskwire" "$release/taskwire-bench" "$nats" "$root/bin/"
strip "$root/bin/taskwire" "$root/bin/taskwire-bench"
# Postgres without its JIT (llvm is large and the bench does not use it).
tar -C /usr/lib/postgresql --exclude='llvmjit*' --exclude='bitcode' -cf - "$version" |
  tar -C "$root/usr/lib/postgresql" -xf -
cp -a "/usr/share/postgresql/$version" "$root/usr/share/postgresql/"

# Every library the binaries load, but glibc's own and the loader (ldd fails on the
# files that are not dynamic executables; what it lists for the others is enough).
{ find "$root/bin" "$root/usr/lib/postgresql/$version" -type f -perm -u+x -o -type f -name '*.so*' |
  xargs -r ldd 2>/dev/null || true; } |
  awk '$2 == "=>" && $3 ~ /^\// { print $3 }' |
  sort -u |
  grep -Ev '/(libc|libm|libdl|librt|libpthread|libresolv|libutil|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$root/libs/"; done

cat > "$root/run.sh" <<EOF
#!/usr/bin/env bash
# Runs taskwire-bench from this bundle (see scripts/bench-bundle.sh); arguments go to it.
set -euo pipefail
here=\$(cd "\$(dirname "\$0")" && pwd)
id postgres >/dev/null 2>&1 || useradd -r -s /bin/bash postgres
echo "\$here/libs" > /etc/ld.so.conf.d/zz-taskwire-bench.conf
ldconfig
# Postgres's data dirs are made under the temporary dir, as the postgres user.
chmod 755 "\$here" "\$here/.."
export TASKWIRE_PG_BIN=\$here/usr/lib/postgresql/$version/bin
export TASKWIRE_NATS_SERVER=\$here/bin/nats-server
cd "\$here"
exec "\$here/bin/taskwire-bench" --taskwire-bin "\$here/bin/taskwire" "\$@"
EOF
chmod 755 "$root/run.sh"

mkdir -p "$(dirname "$out")"
tar -C "$stage" -cJf "$out" bench-bundle
echo "bench-bundle: $out ($(du -h "$out" | cut -f1)), Postgres $version, $(ls "$root/libs" | wc -l) libraries"
