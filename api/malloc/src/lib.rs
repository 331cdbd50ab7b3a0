//! glibc gives each thread that contends for the heap an arena of its own,
//! up to eight per core, and an arena keeps the memory it once held. A
//! leadpipe server on SQLite runs a thread per pooled connection (sqlx's
//! SQLite worker) besides tokio's and actix's, so its resident memory grew
//! with the pool, not with the work. Two arenas measured as fast and about
//! 10 MiB smaller (docs/performance.md).

/// Arenas leadpipe's processes use unless `MALLOC_ARENA_MAX` (or
/// `GLIBC_TUNABLES=glibc.malloc.arena_max=…`) says otherwise.
pub const DEFAULT_ARENAS: i32 = 2;

/// Caps malloc's arenas at [`DEFAULT_ARENAS`], unless the environment sets
/// the cap (glibc has read it already, and a user's choice wins). Call it
/// first in `main`, before any thread starts. Returns the cap it set, if any.
pub fn limit_arenas() -> Option<i32> {
    let user_set = std::env::var_os("MALLOC_ARENA_MAX").is_some()
        || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
    if user_set {
        return None;
    }
    set_arena_max(DEFAULT_ARENAS).then_some(DEFAULT_ARENAS)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_arena_max(arenas: i32) -> bool {
    // SAFETY: mallopt only sets a malloc parameter; it takes no pointers
    // and is safe to call from any thread at any time.
    #[allow(unsafe_code)]
    let done = unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) };
    done == 1
}

/// Other allocators (musl, macOS) keep no per-thread arenas of this kind.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_arena_max(_arenas: i32) -> bool {
    false
}
