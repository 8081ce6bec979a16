//! `kwatch`: the command-line face of the `informer` crate. See [`cli`] for the subcommands.

mod cli;

fn main() -> std::process::ExitCode {
    one_malloc_arena();
    cli::main()
}

/// Has glibc's malloc use one arena for every thread.
///
/// By default glibc gives a thread that finds the arena busy an arena of its own (up to eight per
/// core on 64-bit systems). An informer decodes objects on one runtime worker and frees the versions they replace
/// on whichever thread applies or last holds them, so memory freed in one arena is not reused by
/// allocations in another. On the Pods stream of `benches/compare` (20k objects, 50k events),
/// `kwatch watch pods -o none` peaked at 230-237 MiB in four runs of five and 165 MiB in the
/// fifth; with one arena, 158 MiB in five runs of five, and events/s did not drop (41-46k against
/// 39-43k). Other allocators (musl's, macOS's) have no such arenas: nothing to do there.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn one_malloc_arena() {
    // glibc's <malloc.h>: `int mallopt(int param, int value)`, `M_ARENA_MAX` is -8.
    unsafe extern "C" {
        fn mallopt(param: std::ffi::c_int, value: std::ffi::c_int) -> std::ffi::c_int;
    }
    const M_ARENA_MAX: std::ffi::c_int = -8;
    // SAFETY: mallopt is glibc's documented tuning call and takes plain integers. The manual
    // marks it MT-Unsafe, so it must not race other allocator calls: it runs first thing in
    // main, before any other thread exists. A refusal (return 0) leaves the default, which
    // costs only memory.
    unsafe {
        mallopt(M_ARENA_MAX, 1);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn one_malloc_arena() {}
