#!/usr/bin/env bash
# Builds the Debian package: target/debian/ddftp_VERSION_ARCH.deb.
#   pkg/deb.sh              build the binaries (release), then the package
#   pkg/deb.sh --no-build   package the binaries already in target/release
# Needs cargo-deb (cargo install cargo-deb). Man pages and completions are
# generated from the binaries' own command-line definitions.
set -euo pipefail
cd "$(dirname "$0")/.."
target=target
if [ "${1:-}" = --no-build ]; then
  shift
else
  cargo build --release -p ddftp-cli
fi
gen=pkg/gen
rm -rf "$gen" && mkdir -p "$gen/man" "$gen/completions"
"$target/release/ddftp" man "$gen/man"
"$target/release/ddftpd" generate man > "$gen/man/ddftpd.8"
gzip -9n "$gen"/man/*
for sh in bash zsh fish; do
  "$target/release/ddftp" completions $sh > "$gen/completions/ddftp.$sh"
  "$target/release/ddftpd" generate $sh > "$gen/completions/ddftpd.$sh"
done
gzip -9nc pkg/changelog > "$gen/changelog.Debian.gz"
rm -f "$target"/debian/ddftp_*.deb
cargo deb -p ddftp-cli --no-build --strip -o "$target/debian" "$@" >&2
ls "$target"/debian/ddftp_*.deb
