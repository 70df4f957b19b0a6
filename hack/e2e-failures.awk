# Reads `go test -v` output of parallel tests and prints, for each failed test, the last lines it
# logged from its own _test.go files (t.Errorf and t.Fatalf among them). CI shows only the tail of
# a run; the failure's own message is otherwise far above it, buried under other tests' output and
# the failed namespace's diagnostics dump.
# Usage: awk -f hack/e2e-failures.awk go-test.log
/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }
/^[ ]*--- FAIL: / { failed[$3] = 1; order[++n] = $3; next }
/^[ ]*--- (PASS|SKIP): / { next }
/^ +[A-Za-z0-9_]+_test\.go:[0-9]+: / {
  if (cur == "" || $0 ~ /MEASURE|diagnostics written to/) next
  line = $0
  if (length(line) > 1400) line = substr(line, 1, 1400) "…"
  k = ++count[cur]
  last[cur, k] = line
}
END {
  for (i = 1; i <= n; i++) {
    t = order[i]
    if (seen[t]++) continue
    printf "----- %s: its last lines from _test.go files -----\n", t
    from = count[t] - 11
    if (from < 1) from = 1
    for (k = from; k <= count[t]; k++) print last[t, k]
  }
}
