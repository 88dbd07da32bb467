//! Work shared by the calling thread and helper threads: the CPU packer's bands, the
//! transposer's word chunks and the walk orders' planes, each drawn by whichever worker
//! is free.

/// Runs `work` on the calling thread and on up to `threads - 1` scoped helper threads, and
/// returns when every call has returned. Each call draws items until none are left, so a
/// helper the system refuses to start is one worker fewer, never lost work.
pub(crate) fn run_on_threads(threads: usize, work: impl Fn() + Sync) {
    std::thread::scope(|scope| {
        for _ in 1..threads {
            if std::thread::Builder::new()
                .spawn_scoped(scope, &work)
                .is_err()
            {
                break;
            }
        }
        work();
    });
}
