// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Command report summarises the conformance suite's JUnit reports: for each
// group of the focus list (a line's text up to its first ".*"), how many
// specs passed, failed and were skipped, and each failure with the first
// line of its message. Only the specs the focus list selects count: the
// others are in the report as skipped by the filter.
//
//	report --focus focus.txt --skip skip.txt [--markdown] junit_*.xml
package main

import (
	"bufio"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

type testSuites struct {
	Suites []testSuite `xml:"testsuite"`
}

type testSuite struct {
	Cases []testCase `xml:"testcase"`
}

type testCase struct {
	Name    string   `xml:"name,attr"`
	Status  string   `xml:"status,attr"`
	Time    float64  `xml:"time,attr"`
	Failure *message `xml:"failure"`
	Error   *message `xml:"error"`
	Skipped *message `xml:"skipped"`
}

type message struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// line is one regular expression of a list, and the group it names.
type line struct {
	group string
	re    *regexp.Regexp
}

func readList(path string) ([]line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ls []line
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		re, err := regexp.Compile(t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		g, _, _ := strings.Cut(t, ".*")
		g = strings.TrimSpace(strings.TrimSuffix(strings.ReplaceAll(g, `\`, ""), "$"))
		ls = append(ls, line{group: g, re: re})
	}
	return ls, sc.Err()
}

type result struct {
	passed, failed, skipped, notRun int
	failures                        []string
}

func main() {
	focusFile := flag.String("focus", "", "the focus list (required)")
	skipFile := flag.String("skip", "", "the skip list")
	markdown := flag.Bool("markdown", false, "write a Markdown table")
	flag.Parse()
	if err := run(*focusFile, *skipFile, *markdown, flag.Args(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(focusFile, skipFile string, markdown bool, reports []string, out io.Writer) error {
	if focusFile == "" || len(reports) == 0 {
		return errors.New("usage: report --focus FILE [--skip FILE] [--markdown] JUNIT")
	}
	focus, err := readList(focusFile)
	if err != nil {
		return err
	}
	var skip []line
	if skipFile != "" {
		if skip, err = readList(skipFile); err != nil {
			return err
		}
	}
	results := map[string]*result{}
	var order []string
	for _, l := range focus {
		if _, ok := results[l.group]; !ok {
			results[l.group] = &result{}
			order = append(order, l.group)
		}
	}
	seen := map[string]bool{}
	for _, path := range reports {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var ts testSuites
		if err := xml.Unmarshal(data, &ts); err != nil {
			// One suite alone, as some writers make it.
			var one testSuite
			if err2 := xml.Unmarshal(data, &one); err2 != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			ts.Suites = []testSuite{one}
		}
		for _, s := range ts.Suites {
			for _, c := range s.Cases {
				name := strings.TrimPrefix(c.Name, "[It] ")
				g := groupOf(focus, name)
				if g == "" || matches(skip, name) || seen[name] {
					continue
				}
				r := results[g]
				seen[name] = true
				switch {
				case c.Status == "failed" || c.Status == "timedout" || c.Status == "panicked" || c.Status == "interrupted" || c.Failure != nil || c.Error != nil:
					r.failed++
					m := c.Failure
					if m == nil {
						m = c.Error
					}
					if m == nil {
						m = &message{Message: c.Status}
					}
					r.failures = append(r.failures, fmt.Sprintf("%s: %s", name, firstLine(m)))
				case c.Skipped != nil && c.Skipped.Message == "skipped":
					// Selected, but never started: the run ended first.
					r.notRun++
				case c.Status == "skipped" || c.Skipped != nil:
					// Selected, yet skipped: the spec skipped itself.
					r.skipped++
					if c.Skipped != nil {
						r.failures = append(r.failures, fmt.Sprintf("%s: (skipped) %s", name, firstLine(c.Skipped)))
					}
				default:
					r.passed++
				}
			}
		}
	}
	var total result
	if markdown {
		fmt.Fprintln(out, "| Group | Passed | Failed | Skipped | Not run |")
		fmt.Fprintln(out, "|---|---:|---:|---:|---:|")
	} else {
		fmt.Fprintf(out, "%-42s %7s %7s %8s %8s\n", "GROUP", "PASSED", "FAILED", "SKIPPED", "NOT RUN")
	}
	for _, g := range order {
		r := results[g]
		total.passed, total.failed, total.skipped, total.notRun = total.passed+r.passed, total.failed+r.failed, total.skipped+r.skipped, total.notRun+r.notRun
		if markdown {
			fmt.Fprintf(out, "| %s | %d | %d | %d | %d |\n", g, r.passed, r.failed, r.skipped, r.notRun)
		} else {
			fmt.Fprintf(out, "%-42s %7d %7d %8d %8d\n", g, r.passed, r.failed, r.skipped, r.notRun)
		}
	}
	if markdown {
		fmt.Fprintf(out, "| **Total** | **%d** | **%d** | **%d** | **%d** |\n", total.passed, total.failed, total.skipped, total.notRun)
	} else {
		fmt.Fprintf(out, "%-42s %7d %7d %8d %8d\n", "TOTAL", total.passed, total.failed, total.skipped, total.notRun)
	}
	var failures []string
	for _, g := range order {
		failures = append(failures, results[g].failures...)
	}
	sort.Strings(failures)
	if len(failures) > 0 {
		fmt.Fprintln(out)
		fmt.Fprintln(out, "Failures:")
		for _, f := range failures {
			fmt.Fprintf(out, "- %s\n", f)
		}
	}
	// A line that matches no spec of the suite (renamed upstream, or
	// mistyped) would otherwise leave a run quietly smaller.
	var empty []string
	for _, g := range order {
		if r := results[g]; r.passed+r.failed+r.skipped+r.notRun == 0 {
			empty = append(empty, g)
		}
	}
	if len(empty) > 0 {
		return fmt.Errorf("%s: no spec of the report matches %s", focusFile, strings.Join(empty, "; "))
	}
	return nil
}

func groupOf(focus []line, name string) string {
	for _, l := range focus {
		if l.re.MatchString(name) {
			return l.group
		}
	}
	return ""
}

func matches(ls []line, name string) bool {
	for _, l := range ls {
		if l.re.MatchString(name) {
			return true
		}
	}
	return false
}

// firstLine is the first non-empty line of a failure's message, shortened.
func firstLine(m *message) string {
	text := m.Message
	if strings.TrimSpace(text) == "" {
		text = m.Text
	}
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "[FAILED]") && len(l) == len("[FAILED]") {
			continue
		}
		l = strings.TrimPrefix(l, "[FAILED] ")
		if len(l) > 200 {
			l = l[:200] + "…"
		}
		return l
	}
	return "(no message)"
}
