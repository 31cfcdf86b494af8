//! The `strata` binary: `strata [config-file] [--name value ...]`, like `redis-server`.

use std::alloc::{GlobalAlloc, Layout};

use strata_node::config::{Config, SPECS};
use strata_node::memory::track;

/// mimalloc, with the block size of every allocation and free counted for INFO `used_memory`.
/// mimalloc's "u" calls report the block size while they have its page at hand, which costs
/// nothing beside the second page lookup a separate `mi_usable_size` call would make. Allocation
/// and free report the same measure (the page's block size), so the count never drifts.
struct CountingAlloc;

mod mi {
    use std::ffi::c_void;
    // Exported by the mimalloc build of `libmimalloc-sys` (mimalloc.h), not bound by that crate.
    extern "C" {
        pub fn mi_umalloc_aligned(size: usize, align: usize, block: *mut usize) -> *mut c_void;
        pub fn mi_uzalloc_aligned(size: usize, align: usize, block: *mut usize) -> *mut c_void;
        pub fn mi_urealloc(
            p: *mut c_void,
            size: usize,
            pre: *mut usize,
            post: *mut usize,
        ) -> *mut c_void;
        pub fn mi_ufree(p: *mut c_void, block: *mut usize);
    }
}

/// What every mimalloc block is aligned to at least, so `mi_urealloc` (plain realloc) may move
/// a block of this alignment; mimalloc's own aligned realloc makes the same choice.
const WORD_ALIGN: usize = std::mem::size_of::<usize>();

// SAFETY: every call forwards to mimalloc with the same arguments; accounting never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let mut block = 0;
        let p = mi::mi_umalloc_aligned(layout.size(), layout.align(), &mut block);
        if !p.is_null() {
            track(block as isize);
        }
        p.cast()
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let mut block = 0;
        let p = mi::mi_uzalloc_aligned(layout.size(), layout.align(), &mut block);
        if !p.is_null() {
            track(block as isize);
        }
        p.cast()
    }

    unsafe fn dealloc(&self, p: *mut u8, _layout: Layout) {
        let mut block = 0;
        mi::mi_ufree(p.cast(), &mut block);
        track(-(block as isize));
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() > WORD_ALIGN {
            // Rare (over-aligned types): allocate, copy and free, each counted.
            let new = Layout::from_size_align_unchecked(new_size, layout.align());
            let q = self.alloc(new);
            if !q.is_null() {
                std::ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
                self.dealloc(p, layout);
            }
            return q;
        }
        let (mut pre, mut post) = (0, 0);
        let q = mi::mi_urealloc(p.cast(), new_size, &mut pre, &mut post);
        if !q.is_null() {
            track(post as isize - pre as isize);
        }
        q.cast()
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

/// `mi_option_arena_eager_commit` in mimalloc v2's `mi_option_t` (mimalloc.h; not bound by
/// `libmimalloc-sys`).
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Has mimalloc commit its arenas as they are used rather than all at once. With eagerly committed
/// arenas (its default on Linux) a purge can only mark free pages `MADV_FREE`, which the kernel
/// takes back when it is short of memory but which stay in RSS until then: after a bulk load at two
/// threads, the argument vectors that crossed threads left ~1.7 MiB of free pages counted in RSS for
/// good (10K lists of 1000: RSS 143.4 MiB against 141.6 at one thread and Redis's 141.3). Committed
/// on demand, purged memory is decommitted (`MADV_DONTNEED`) and leaves RSS at once (141.0). The
/// eager arena was also backed by transparent huge pages where the kernel allows them on request
/// (134 MiB of 226 after 1M SETs of 256 bytes: RSS rounded up to 2 MiB pages); Redis turns those
/// off for itself (`disable-thp yes`), and now neither uses them. The price is a page fault per
/// 4 KiB as the data grows (55K for those 1M SETs, Redis 72K, against 2.8K with huge pages).
///
/// It must run before the first allocation reserves the first arena, which happens before `main`
/// (the runtime's own set-up allocates), so it runs from `.init_array`, where the C runtime calls
/// constructors before the Rust runtime starts. (Eager arena commit is mimalloc's default only on
/// Linux, where overcommit makes it cheap.)
extern "C" fn commit_arenas_on_demand() {
    // SAFETY: mi_option_set only stores the value; arenas reserved from now on read it.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0) }
}

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static COMMIT_ARENAS_ON_DEMAND: extern "C" fn() = commit_arenas_on_demand;

fn main() {
    strata_node::memory::set_release(release_free_memory);
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
    let table = strata_commands::table();
    let command_exists =
        |name: &str| table.lookup_client_name(name).is_some() && !name.contains('|');
    let config = match Config::from_args(&args, &command_exists) {
        Ok(c) => c,
        Err(e) => {
            // Redis's report, as redis-server writes it; nothing was started or written.
            eprint!("{}", e.report());
            std::process::exit(1);
        }
    };
    // `rename-command` lines take effect before anything is served (the parser checked them).
    if let Err(e) = table.rename_commands(config.renames()) {
        eprintln!("strata: rename-command: {e}");
        std::process::exit(1);
    }
    if let Some(dir) = config.get("dir").filter(|d| !d.is_empty()) {
        if let Err(e) = std::fs::create_dir_all(&dir) {
            eprintln!("strata: can't create data directory {dir}: {e}");
            std::process::exit(1);
        }
        // As Redis, the process works in `dir` (relative file names, as `logfile`, are inside
        // it) and CONFIG GET shows it as an absolute path.
        if let Err(e) = config.set("dir", &dir) {
            eprintln!("strata: can't chdir to {dir}: {e:?}");
            std::process::exit(1);
        }
    }
    std::process::exit(strata_server::run(config));
}
