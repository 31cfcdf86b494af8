//! The `strata` binary: `strata [config-file] [--name value ...]`, like `redis-server`.

use std::alloc::{GlobalAlloc, Layout};

use mimalloc::MiMalloc;
use strata_commands::config::{Config, SPECS};
use strata_commands::memory::track;

/// mimalloc, with every allocation's usable size counted for INFO `used_memory`.
struct CountingAlloc;

fn usable(p: *mut u8) -> isize {
    // SAFETY: `p` is a live allocation returned by mimalloc.
    unsafe { libmimalloc_sys::mi_usable_size(p as *const _) as isize }
}

// SAFETY: every call forwards to mimalloc with the same arguments; accounting never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = MiMalloc.alloc(layout);
        if !p.is_null() {
            track(usable(p));
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = MiMalloc.alloc_zeroed(layout);
        if !p.is_null() {
            track(usable(p));
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        track(-usable(p));
        MiMalloc.dealloc(p, layout)
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = usable(p);
        let q = MiMalloc.realloc(p, layout, new_size);
        if !q.is_null() {
            track(usable(q) - old);
        }
        q
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn help() -> String {
    let mut s = String::from(
        "Usage: strata [/path/to/redis.conf] [--name value ...]\n\
         \n\
         Strata is a thread-per-core, Redis-compatible data store. Every redis.conf setting it knows\n\
         can be given in the config file or as --name value. Settings:\n\n",
    );
    for spec in SPECS {
        let tag = if spec.strata_only {
            " (Strata only)"
        } else {
            ""
        };
        s.push_str(&format!(
            "  --{:<28} {}{tag} [default: {:?}]\n",
            spec.name, spec.help, spec.default
        ));
    }
    s
}

/// Frees the calling thread's empty pages and purges memory freed long enough ago.
fn release_free_memory() {
    // SAFETY: mi_collect has no preconditions.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

fn main() {
    strata_commands::memory::set_release(release_free_memory);
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{}", help());
        return;
    }
    if args.iter().any(|a| a == "--version" || a == "-v") {
        println!(
            "Strata server v={} (Redis 7.0 compatible)",
            env!("CARGO_PKG_VERSION")
        );
        return;
    }
    let config = match Config::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("strata: {e}");
            std::process::exit(1);
        }
    };
    if let Some(dir) = config.get("dir").filter(|d| !d.is_empty()) {
        if let Err(e) = std::fs::create_dir_all(&dir) {
            eprintln!("strata: can't create data directory {dir}: {e}");
            std::process::exit(1);
        }
        // Like Redis (which chdir()s there), report the directory as an absolute path.
        if let Some(abs) = std::fs::canonicalize(&dir)
            .ok()
            .and_then(|p| p.to_str().map(String::from))
        {
            let _ = config.set("dir", &abs);
        }
    }
    std::process::exit(strata_server::run(config));
}
