//! `interpose!`: one definition for exported symbols that share a signature and a body.

/// Defines interposed C functions that share one signature and one body: the `*64`
/// twins (`pread`/`pread64`, `stat`/`stat64`, ...) and other symbols that differ only
/// in their name (`fsync`/`fdatasync`, `posix_spawn`/`posix_spawnp`).
///
/// ```text
/// interpose! {
///     /// Documentation, for every name.
///     fn pread | pread64 (fd: c_int, buf: *mut c_void, n: usize, off: i64) -> isize
///     where next
///     {
///         if let Some(_g) = dafs_fd(fd) {
///             return ret_ssize(do_read(fd, buf.cast(), n, Some(off)));
///         }
///         next(fd, buf, n, off)
///     }
/// }
/// ```
///
/// Each name becomes a `#[no_mangle] pub unsafe extern "C" fn` with exactly the written
/// signature, so every twin has one C ABI. In the body, the name after `where` (`next`
/// by convention) is the next definition (glibc's) of the symbol being defined, as a
/// typed function pointer from `real!`. Two variations:
/// - `name => other`: `next` is the next definition of `other` instead — for a twin
///   this library always answered by calling the plain function (`statfs64` =>
///   `statfs`), or a fixed-argument wrapper (`__open_2` => `open`);
/// - `where next: fn(types)`: the prototype of `next`, when it is not the function's
///   own (C-variadic `fn(c_int, c_int, ...)`, or other arguments).
macro_rules! interpose {
    (
        $(#[$attr:meta])*
        fn $($name:ident $(=> $target:ident)?)|+ ($($params:tt)*) -> $ret:ty
        where $next:ident $(: fn $proto:tt)?
        $body:block
    ) => {
        // Bundle the attributes and the prototype, so that they can be repeated per name.
        interpose!(
            @each [$(#[$attr])*] [$([$name $($target)?])+] ($($params)*) $ret;
            $next [$($proto)?] $body
        );
    };
    (@each $attrs:tt [$($one:tt)+] $params:tt $ret:ty; $next:ident $proto:tt $body:block) => {
        $(interpose!(@one $attrs $one $params $ret; $next $proto $body);)+
    };
    // Without `=> other`, `next` is the symbol's own next definition...
    (@one $attrs:tt [$name:ident] $($rest:tt)*) => {
        interpose!(@one $attrs [$name $name] $($rest)*);
    };
    // ...and without `: fn(...)`, it has the function's own prototype.
    (
        @one $attrs:tt $names:tt ($($arg:ident : $ty:ty),* $(,)?) $ret:ty;
        $next:ident [] $body:block
    ) => {
        interpose!(@one $attrs $names ($($arg: $ty),*) $ret; $next [($($ty),*)] $body);
    };
    (
        @one [$($attr:tt)*] [$name:ident $target:ident] ($($arg:ident : $ty:ty),* $(,)?)
        $ret:ty; $next:ident [$proto:tt] $body:block
    ) => {
        $($attr)*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            let $next = real!($target: fn $proto -> $ret);
            $body
        }
    };
}
