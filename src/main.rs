//! The `fragmask` command-line program.

mod cli;

fn main() -> std::process::ExitCode {
    // SAFETY: called first thing in main, before any thread exists; restoring the
    // default SIGPIPE action makes `fragmask ... | head` end quietly like other Unix
    // tools instead of panicking on a closed stdout.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    remove_temporaries_on_signals();
    let code = cli::run();
    // The library reports compile-cache repairs as values; the program shows them.
    for repair in fragmask::host::cache::take_repairs() {
        eprintln!("warning: {repair}");
    }
    code
}

/// SIGINT, SIGTERM and SIGHUP remove the temporaries being written, outputs and
/// compile-cache entries alike (`fragmask::masks::io::remove_live_temporaries`), then end the process by the same
/// signal, so the parent sees the usual status (shells print 130 / 143 / 129).
fn remove_temporaries_on_signals() {
    extern "C" fn on_signal(signal: libc::c_int) {
        fragmask::masks::io::remove_live_temporaries();
        // SAFETY: signal and raise are async-signal-safe (POSIX.1-2017, 2.4.3). The
        // signal is blocked while this handler runs, so the raised one is delivered,
        // with the default action (terminate), when the handler returns.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: sigaction with a zeroed struct plus handler and empty mask is the
        // documented way to install a handler; `old` receives the previous action.
        // Done before any thread exists. A signal the parent set to be ignored (nohup,
        // `cmd &` without job control) stays ignored, as POSIX asks of programs that
        // catch signals.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, &action, &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
            {
                libc::sigaction(signal, &old, std::ptr::null_mut());
            }
        }
    }
}
