//! The `fragmask` command-line program.

mod cli;

fn main() -> std::process::ExitCode {
    // SAFETY: called first thing in main, before any thread exists; restoring the
    // default SIGPIPE action makes `fragmask ... | head` end quietly like other Unix
    // tools instead of panicking on a closed stdout.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    cli::run()
}
