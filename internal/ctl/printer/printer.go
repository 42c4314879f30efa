// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package printer writes what liqoctl shows of objects other clusters
// wrote (names, labels, messages, errors) so that none of it can drive
// the operator's terminal, nor make a row or a column of its own.
package printer

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
)

// Safe is s as it is when every rune of it prints, and quoted, with Go's
// escapes, when one does not (a control sequence, a tab, a line feed).
func Safe(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// Row writes cells as one row of a table (tab-separated, for a
// tabwriter), each made Safe first.
func Row(w io.Writer, cells ...string) {
	safe := make([]string, len(cells))
	for i, c := range cells {
		safe[i] = Safe(c)
	}
	fmt.Fprintln(w, strings.Join(safe, "\t"))
}
