/*
 * posixtest: the project's POSIX conformance suite (issue 19).
 *
 *     posixtest DIR [CASE...]      run every case (or the named ones) inside DIR
 *     posixtest -l                 list the cases
 *
 * Runs as root. It chdirs into DIR (which must exist and be empty of the case names),
 * makes one subdirectory per case and runs the case in it. Cases about identity fork and
 * drop to uid/gid 65534 ("nobody") or 65533 ("another user") with setgroups, setgid and
 * setuid in the child. The expectations are what Linux does on ext4: the same program is
 * run on a local directory, in a FUSE mount of dafs and under the LD_PRELOAD library, and
 * scripts/test-posix.sh compares the three (tests/posix/known-differences.tsv lists what
 * may still differ).
 *
 * Output: one line per check, tab-separated,
 *     CASE  CHECK  ok
 *     CASE  CHECK  FAIL  expected X got Y
 * where X and Y are stable tokens (errno names, octal modes, uid:gid, "later"/"unchanged",
 * "missing"...), never values that change from run to run. Lines starting with '#' are
 * comments; setup problems go to stderr. The exit status is 0 unless the program could not
 * run at all (checks that fail do not change it).
 */
#include "posixtest.h"

/* ------------------------------------------------------------------ the table */

static const struct tcase {
    const char *name;
    void (*fn)(void);
} cases[] = {
    {"open", c_open},
    {"open_perm", c_open_perm},
    {"owner", c_owner},
    {"umask", c_umask},
    {"mkdir", c_mkdir},
    {"rmdir", c_rmdir},
    {"unlink", c_unlink},
    {"rename_file", c_rename_file},
    {"rename_dir", c_rename_dir},
    {"rename_sticky", c_rename_sticky},
    {"link", c_link},
    {"symlink", c_symlink},
    {"chmod", c_chmod},
    {"chown", c_chown},
    {"truncate", c_truncate},
    {"utimes", c_utimes},
    {"access", c_access},
    {"mknod", c_mknod},
    {"special_ops", c_special_ops},
    {"socket", c_socket},
    {"readdir", c_readdir},
    {"names", c_names},
    {"pathmax", c_pathmax},
    {"prefix_errors", c_prefix_errors},
    {"eloop", c_eloop},
    {"times", c_times},
    {"suid_clear", c_suid_clear},
    {"setgid_dir", c_setgid_dir},
    {"symlink_attrs", c_symlink_attrs},
    {"chdir", c_chdir},
};

static int selected(const char *name, int argc, char **argv) {
    if (argc == 0) return 1;
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], name) == 0) return 1;
    return 0;
}

int main(int argc, char **argv) {
    size_t ncases = sizeof cases / sizeof cases[0];
    if (argc == 2 && strcmp(argv[1], "-l") == 0) {
        for (size_t i = 0; i < ncases; i++) puts(cases[i].name);
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: posixtest DIR [CASE...]  |  posixtest -l\n");
        return 2;
    }
    if (geteuid() != 0) {
        fprintf(stderr, "posixtest: must run as root (identity cases switch users)\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    umask(022);
    if (chdir(argv[1]) < 0 || !getcwd(g_base, sizeof g_base)) {
        fprintf(stderr, "posixtest: cannot enter %s: %s\n", argv[1], strerror(errno));
        return 2;
    }
    for (size_t i = 0; i < ncases; i++) {
        if (!selected(cases[i].name, argc - 2, argv + 2)) continue;
        g_case = cases[i].name;
        g_children = 0;
        /* The case's directory, as a check of its own: where it cannot be made, every
         * other check of the case is missing. */
        errno = 0;
        long r = mkdir(g_case, 0755);
        if (r == 0) r = chmod(g_case, 0755);
        if (r == 0) r = chdir(g_case);
        if (chk_ok("setup", r) < 0) continue;
        cases[i].fn();
        if (g_child) _exit(0); /* a child that left its AS block: never run on */
        umask(022);
        if (chdir(g_base) < 0) {
            fprintf(stderr, "posixtest: cannot return to %s: %s\n", g_base, strerror(errno));
            return 2;
        }
    }
    printf("# end\n");
    return 0;
}
