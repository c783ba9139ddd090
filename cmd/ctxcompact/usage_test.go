package main

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var (
	usageFlag   = regexp.MustCompile(`--([a-z][a-z0-9-]*)`)
	definedFlag = regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)(?: |$)`)
)

func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func flagList(set map[string]bool) []string {
	var l []string
	for f := range set {
		l = append(l, "--"+f)
	}
	sort.Strings(l)
	return l
}

// commandUsage returns what `ctxcompact NAME --help` prints: the flags its usage
// lines name, and those its flag set defines (the listing flag.PrintDefaults
// writes after them).
func commandUsage(t *testing.T, name string) (usage, defined map[string]bool, help string) {
	t.Helper()
	code, out, errOut := cliRun(t, "", name, "--help")
	if code != 0 {
		t.Fatalf("%s --help: exit %d: %s", name, code, errOut)
	}
	usage, defined = map[string]bool{}, map[string]bool{}
	lines := 0
	for _, line := range strings.Split(out, "\n") {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "usage: ctxcompact "+name) || strings.HasPrefix(line, " ") && strings.HasPrefix(l, "ctxcompact "+name+" ") {
			lines++
			for _, m := range usageFlag.FindAllStringSubmatch(l, -1) {
				usage[m[1]] = true
			}
		}
	}
	if lines == 0 {
		t.Fatalf("%s --help prints no usage line:\n%s", name, out)
	}
	for _, m := range definedFlag.FindAllStringSubmatch(out, -1) {
		defined[m[1]] = true
	}
	return usage, defined, out
}

// TestUsageNamesEveryFlag: each command's usage lines name every flag its flag set
// defines and no other, so `ctxcompact help COMMAND` cannot miss a flag; the help
// lists each flag with its text (flag.PrintDefaults), the usage lines are written
// by hand.
func TestUsageNamesEveryFlag(t *testing.T) {
	for _, name := range commandNames() {
		usage, defined, help := commandUsage(t, name)
		if got, want := flagList(usage), flagList(defined); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: the usage lines name %v; its flag set defines %v:\n%s", name, got, want, help)
		}
	}
}

// TestReadmeUsageNamesEveryFlag: the README's CLI block has a line for every
// command, and the flags it names for a command are those of its flag set.
func TestReadmeUsageNamesEveryFlag(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		if strings.Contains(m[1], "\nctxcompact compact FILE") || strings.HasPrefix(m[1], "ctxcompact compact FILE") {
			block = m[1]
		}
	}
	if block == "" {
		t.Fatal("README.md has no sh block with the CLI's usage (a line starting `ctxcompact compact FILE`)")
	}
	readmeFlags := map[string]map[string]bool{}
	current := ""
	for _, line := range strings.Split(block, "\n") {
		if k := regexp.MustCompile(`\s#`).FindStringIndex(line); k != nil {
			line = line[:k[0]] // a comment
		}
		if f := strings.Fields(line); len(f) > 1 && f[0] == "ctxcompact" {
			current = f[1]
		} else if !strings.HasPrefix(line, " ") {
			current = ""
		}
		if _, ok := commands[current]; !ok {
			continue
		}
		if readmeFlags[current] == nil {
			readmeFlags[current] = map[string]bool{}
		}
		for _, m := range usageFlag.FindAllStringSubmatch(line, -1) {
			readmeFlags[current][m[1]] = true
		}
	}
	for _, name := range commandNames() {
		_, defined, _ := commandUsage(t, name)
		got, ok := readmeFlags[name]
		if !ok {
			t.Errorf("README.md's CLI block has no line for %s (flags %v)", name, flagList(defined))
			continue
		}
		if g, w := flagList(got), flagList(defined); strings.Join(g, " ") != strings.Join(w, " ") {
			t.Errorf("README.md's CLI block names %v for %s; its flag set defines %v", g, name, w)
		}
	}
}
