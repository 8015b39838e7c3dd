//! # dafs-preload — POSIX interposition for DAFS (`LD_PRELOAD=libdafs_preload.so`)
//!
//! With `DAFS_MOUNT=/dafs=dafs://127.0.0.1:7420/`, every path under `/dafs` is served by
//! the DAFS user-level client linked into this library; every other path and file
//! descriptor goes, untouched, to the next definition of the function (glibc), found with
//! `dlsym(RTLD_NEXT, ...)`.
//!
//! ## Why Rust (and no C file)
//!
//! The logic — descriptor table, open file descriptions, directory streams, locking,
//! fork/exec hand-over — is written in Rust on top of [`dafs_client::Client`] directly,
//! not on the C API: one fewer layer of conversions, the client's errors map to errno
//! in one place, and the state is checked by the compiler. What Rust cannot *define*
//! are C-variadic functions (`open`, `openat`, `fcntl`, `ioctl`, ...). They are defined
//! here with their maximal fixed argument list (`open(path, flags, mode)`), which is
//! ABI-compatible with a variadic caller on the two supported targets (x86_64 and
//! aarch64 Linux: variadic integer and pointer arguments travel in the same registers /
//! stack slots as fixed ones; the callee ignores `%al`), and exactly what glibc's own
//! `va_arg` reads. A C shim was the alternative, but rustc hides every non-Rust symbol of
//! a cdylib behind its version script, so the shim could not export `open` without
//! replacing cargo's link step. Other targets are refused at compile time.
//!
//! ## Layers
//!
//! - `real`: the next definition of each interposed function, resolved once.
//! - a thread-local **reentrancy guard**: while this library runs (including inside the
//!   client, whose sockets, shared-memory files and `/proc` reads use libc), every
//!   interposed function goes straight to glibc. So the client never recurses into the
//!   interposer and never needs to know about it.
//! - [`paths`]: `DAFS_MOUNT` parsing and lexical path resolution.
//! - `state`: one process-wide state under one mutex (the client is `Send`, not `Sync`):
//!   per mount a lazily connected client; descriptors → shared open file descriptions
//!   (refcounted like the kernel's: `dup` shares the offset); directory streams; the
//!   virtual working directory. One module per concern under `state/`.
//! - `exports`: the `#[no_mangle]` functions (about 180 symbols, including the glibc
//!   2.36 `64`/`__*_2`/`__xstat` variants real binaries import), one module per family
//!   of functions under `exports/`; symbols that differ only in their name or C struct
//!   type are defined once, by `interpose!`.
//!
//! Descriptors handed out are real kernel descriptors: an `O_PATH` open of `/dev/null`
//! reserves the number (so it never collides with anything the kernel hands out), and
//! a program or child that reaches one without this library gets `EBADF` from
//! `read`/`write` instead of silently wrong data. See README.md, "POSIX interposition
//! (LD_PRELOAD)", for fork, exec, working-directory and locking semantics.

#![allow(clippy::missing_safety_doc)]

#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
compile_error!("dafs-preload defines variadic libc functions with fixed arguments, which is ABI-safe only on x86_64 and aarch64 Linux");

pub mod paths;
#[macro_use]
mod real;
#[macro_use]
mod state;
mod exports;

pub use exports::*;
