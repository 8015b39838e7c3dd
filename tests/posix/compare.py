#!/usr/bin/env python3
"""Judge posixtest results: local directory vs the dafs paths (scripts/test-posix.sh).

    compare.py KNOWN.tsv LOCAL.tsv PATH=RESULTS.tsv... [--local-name ext4] [--write-known FILE]

Every check must pass on the local directory (the suite itself must be right on ext4).
On each dafs path a check is judged:
  - passes locally and on the path, not listed                   -> passed
  - fails on the path and listed in KNOWN with the same result   -> passed (known difference)
  - fails on the path, not listed                                -> failed (new difference)
  - fails on the path, listed with another result                -> failed (update the list)
  - passes on the path but listed                                -> failed ("now passes: remove
                                                                    from known-differences.tsv")
A listed check that the suite no longer has fails too. In KNOWN, '*' as CASE or CHECK
covers every case or check (an exact line wins over '*' lines). Prints a table per case (local /
path pass counts), the totals with the percentage of what local passes, and last
"posix: N passed, N failed" (checks on the dafs paths, judged as above, plus local failures).
--write-known writes the list that would make today's results pass (for maintainers:
review it, and give every line a reason).
"""
import sys
from collections import OrderedDict

# Cases about special files (FIFOs, sockets, device nodes): the issue also quotes the
# share without them.
SPECIAL = {"mknod", "special_ops", "socket", "readdir"}


def load_results(path):
    """OrderedDict (case, check) -> (ok, got); got is the token after 'got ' or ''."""
    res = OrderedDict()
    dups = []
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) < 3:
                continue
            case, check, result = parts[0], parts[1], parts[2]
            detail = parts[3] if len(parts) > 3 else ""
            got = detail.split(" got ", 1)[1] if " got " in detail else detail
            if (case, check) in res:
                dups.append((case, check))
            res[(case, check)] = (result == "ok", got, detail)
    return res, dups


def load_known(path):
    known = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) < 5 or not parts[4].strip():
                sys.exit(f"{path}:{n}: expected PATH<TAB>CASE<TAB>CHECK<TAB>SEEN<TAB>REASON")
            key = (parts[0], parts[1], parts[2])
            if key in known:
                sys.exit(f"{path}:{n}: {'/'.join(key)} listed twice")
            known[key] = (parts[3], parts[4])
    return known


def lookup(known, name, key):
    """The entry of KNOWN that covers check KEY on path NAME: exact, then with '*' for the
    check, the case, or both."""
    case, check = key
    for k in ((name, case, check), (name, case, "*"), (name, "*", check), (name, "*", "*")):
        if k in known:
            return k, known[k]
    return None, None


def main(argv):
    write_known = None
    local_name = "the local file system"
    if "--local-name" in argv:
        i = argv.index("--local-name")
        local_name = argv[i + 1]
        del argv[i:i + 2]
    if "--write-known" in argv:
        i = argv.index("--write-known")
        write_known = argv[i + 1]
        del argv[i:i + 2]
    known_path, local_path, paths = argv[0], argv[1], argv[2:]
    known = load_known(known_path)
    local, dups = load_results(local_path)
    runs = OrderedDict()
    for p in paths:
        name, file = p.split("=", 1)
        runs[name] = load_results(file)[0]

    passed = failed = 0
    problems = []
    for case, check in dups:
        failed += 1
        problems.append(f"suite error: {case}/{check} appears twice")
    for (case, check), (ok, got, detail) in local.items():
        if not ok:
            failed += 1
            problems.append(f"fails locally (the suite must be right on ext4): {case}/{check}: {detail}")

    new_known = []
    for name, res in runs.items():
        for key, (lok, _, _) in local.items():
            ok, got, detail = res.get(key, (False, "missing", "check did not run"))
            entry, listed = lookup(known, name, key)
            tag = f"{name}: {key[0]}/{key[1]}"
            if entry and entry[1:] != key:
                tag += f" (listed as {'/'.join(entry[1:])})"
            if not ok:
                reason = listed[1] if listed else "TODO: reason"
                new_known.append((name, key[0], key[1], got, reason))
            if ok and not listed:
                passed += 1
            elif ok and listed:
                failed += 1
                problems.append(f"now passes: remove from known-differences.tsv: {tag}")
            elif listed and listed[0] == got:
                passed += 1
            elif listed:
                failed += 1
                problems.append(f"changed: {tag}: listed \"{listed[0]}\", now \"{got}\" ({detail}): "
                                "update known-differences.tsv")
            else:
                failed += 1
                problems.append(f"new difference: {tag}: {detail}")
        for key in res:
            if key not in local:
                failed += 1
                problems.append(f"{name}: {key[0]}/{key[1]}: not a local check: {res[key][2]}")
    local_cases = {c for c, _ in local}
    local_checks = {k for _, k in local}
    for (name, case, check) in known:
        if name not in runs:
            continue
        if "*" not in (case, check):
            exists = (case, check) in local
        else:
            exists = (case == "*" or case in local_cases) and (check == "*" or check in local_checks)
        if not exists:
            failed += 1
            problems.append(f"stale: known-differences.tsv lists {name}: {case}/{check}, "
                            "which the suite does not have")

    # ---- the table
    cases = OrderedDict()
    for (case, _), (ok, _, _) in local.items():
        cases.setdefault(case, None)
    cols = list(runs)
    w = max([9] + [len(c) + 2 for c in cols])
    head = f"{'case':<16}{'checks':>7}{'local':>7}" + "".join(f"{c:>{w}}" for c in cols)
    print(head)
    print("-" * len(head))
    tot = {"n": 0, "local": 0, **{c: 0 for c in cols}}
    nsp = {"n": 0, "local": 0, **{c: 0 for c in cols}}
    for case in cases:
        keys = [k for k in local if k[0] == case]
        row = {"n": len(keys), "local": sum(local[k][0] for k in keys)}
        for c in cols:
            row[c] = sum(1 for k in keys if local[k][0] and runs[c].get(k, (False,))[0])
        for k in tot:
            tot[k] += row[k]
            if case not in SPECIAL:
                nsp[k] += row[k]
        print(f"{case:<16}{row['n']:>7}{row['local']:>7}" + "".join(f"{row[c]:>{w}}" for c in cols))
    print("-" * len(head))
    print(f"{'total':<16}{tot['n']:>7}{tot['local']:>7}" + "".join(f"{tot[c]:>{w}}" for c in cols))
    for c in cols:
        pct = 100.0 * tot[c] / tot["local"] if tot["local"] else 0.0
        pns = 100.0 * nsp[c] / nsp["local"] if nsp["local"] else 0.0
        print(f"{c} passes {pct:.1f}% of what {local_name} passes "
              f"({tot[c]}/{tot['local']}; {pns:.1f}% without the special-file cases)")

    if write_known:
        with open(write_known, "w", encoding="utf-8", errors="surrogateescape") as f:
            for row in new_known:
                f.write("\t".join(row) + "\n")
        print(f"wrote {len(new_known)} differences to {write_known}")
    if problems:
        print()
        for p in problems[:400]:
            print(p)
        if len(problems) > 400:
            print(f"... and {len(problems) - 400} more")
    print(f"posix: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
