#!/usr/bin/env bash
# The project's test command: unit tests, black-box and differential tests against redis-server, then
# formatting and lint checks. Works on a fresh Debian machine: installs redis-server/redis-tools if missing.
#
# Usage: scripts/test.sh            (from anywhere; runs from the repository root)
# Honours CARGO_TARGET_DIR (default: target). One profile (dev) for everything so the build is reused.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"

step() { printf '\n==> %s\n' "$*"; }
die() {
    printf '\nFAILED: %s\n' "$*" >&2
    exit 1
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

# --- prerequisites ---------------------------------------------------------------------------------------

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    step "installing redis-server and redis-tools (the compatibility oracle)"
    command -v apt-get >/dev/null 2>&1 || die "redis-server/redis-cli missing and apt-get not available; install Redis 7 by hand"
    as_root apt-get update || die "apt-get update"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server redis-tools ||
        die "apt-get install redis-server redis-tools"
    command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 ||
        die "redis-server/redis-cli still not on PATH after apt-get install"
fi

command -v cargo >/dev/null 2>&1 || die "cargo not found: install Rust (https://rustup.rs) first"
command -v python3 >/dev/null 2>&1 || as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y python3 ||
    die "python3 missing (the layer check needs it)"
for component in rustfmt clippy; do
    probe=$([ "$component" = rustfmt ] && echo fmt || echo clippy)
    if ! cargo "$probe" --version >/dev/null 2>&1; then
        command -v rustup >/dev/null 2>&1 || die "cargo $probe missing and rustup not available"
        step "installing rustup component $component"
        rustup component add "$component" || die "rustup component add $component"
    fi
done

printf 'redis-server: %s\n' "$(redis-server --version)"
printf 'cargo:        %s\n' "$(cargo --version)"
printf 'target dir:   %s\n' "$CARGO_TARGET_DIR"

# --- checks ----------------------------------------------------------------------------------------------
# Every check runs even if an earlier one failed, so one run shows everything that is wrong.

failed=()
start=$SECONDS

# The one-way rules between crates and between modules (docs/architecture.md, Layers).
step "scripts/check-layers.py"
python3 scripts/check-layers.py || failed+=("scripts/check-layers.py")

step "cargo test --workspace --no-fail-fast"
cargo test --workspace --no-fail-fast || failed+=("cargo test --workspace")

# Miri checks the unsafe code of the core data structures (entry layout, dict chains) for undefined
# behaviour. It needs a nightly toolchain with the miri and rust-src components; without them the
# step says so and is skipped rather than failing the run.
step "cargo +nightly miri test -p strata-core, strata-rt"
if ! cargo +nightly miri --version >/dev/null 2>&1 && command -v rustup >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal --component miri,rust-src >/dev/null 2>&1 || true
fi
if cargo +nightly miri --version >/dev/null 2>&1; then
    # Strict provenance: pointers kept inside entries must stay pointers, never round-trip via integers.
    MIRIFLAGS="${MIRIFLAGS:--Zmiri-strict-provenance}" cargo +nightly miri test -p strata-core ||
        failed+=("cargo +nightly miri test -p strata-core")
    # The event loop's unsafe code (raw wakers, tasks woken from other threads, the run queue and
    # shutdown). Its socket tests need system calls Miri does not model, so only these modules.
    MIRIFLAGS="${MIRIFLAGS:--Zmiri-strict-provenance}" cargo +nightly miri test -p strata-rt -- executor:: time:: ||
        failed+=("cargo +nightly miri test -p strata-rt")
else
    printf 'skipped: miri not installed (rustup toolchain install nightly --component miri,rust-src)\n'
fi

step "cargo fmt --all -- --check"
cargo fmt --all -- --check || failed+=("cargo fmt --all -- --check")

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings || failed+=("cargo clippy --workspace --all-targets -- -D warnings")

elapsed=$((SECONDS - start))
if [ "${#failed[@]}" -ne 0 ]; then
    printf '\n==================== FAILED (%ss) ====================\n' "$elapsed" >&2
    printf '  - %s\n' "${failed[@]}" >&2
    exit 1
fi
printf '\n==================== all checks passed (%ss) ====================\n' "$elapsed"
