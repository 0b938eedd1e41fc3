package main

import (
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// docCommands returns the commands the "# Commands" list of doc.go names:
// each entry's leading words that are command names, a word a|b|c standing
// for one command each (and the words before it for their group).
func docCommands(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	text := f.Doc.Text()
	start := strings.Index(text, "# Commands\n")
	if start < 0 {
		t.Fatal("doc.go has no # Commands section")
	}
	section := text[start+len("# Commands\n"):]
	if end := strings.Index(section, "\n# "); end >= 0 {
		section = section[:end]
	}
	word := regexp.MustCompile(`^[a-z][a-z-]*$`)
	var cmds []string
	for line := range strings.SplitSeq(section, "\n") {
		entry, ok := strings.CutPrefix(line, "  - ")
		if !ok {
			continue
		}
		var path []string
		for w := range strings.FieldsSeq(entry) {
			w, last := strings.CutSuffix(w, ":")
			if alts := strings.Split(w, "|"); len(alts) > 1 && !slices.ContainsFunc(alts, func(a string) bool { return !word.MatchString(a) }) {
				for _, a := range alts {
					cmds = append(cmds, strings.Join(append(slices.Clone(path), a), " "))
				}
				break // path, the group of the alternatives, is listed too
			}
			if !word.MatchString(w) {
				break
			}
			path = append(path, w)
			if last {
				break
			}
		}
		if path != nil {
			cmds = append(cmds, strings.Join(path, " "))
		}
	}
	return cmds
}

// treeCommands returns every command of the tree below root that a user can
// name, as its path without the program name; a help topic is "help TOPIC".
func treeCommands(root *cobra.Command) []string {
	var cmds []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden {
				continue
			}
			path := strings.TrimPrefix(sub.CommandPath(), root.Name()+" ")
			if sub.IsAdditionalHelpTopicCommand() {
				path = "help " + path
			}
			cmds = append(cmds, path)
			walk(sub)
		}
	}
	walk(root)
	return cmds
}

// TestDocListsEveryCommand: "go doc ./cmd/spent" names every command of the
// tree, and no command the tree lacks.
func TestDocListsEveryCommand(t *testing.T) {
	root := NewMain().rootCommand()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	tree, doc := treeCommands(root), docCommands(t)
	for _, want := range []string{"serve", "version", "completion bash", "help environment", "wallet spend", "unknown resolve"} {
		if !slices.Contains(tree, want) {
			t.Fatalf("the tree lacks %q (tree: %q): this test reads it wrong", want, tree)
		}
	}
	for _, c := range tree {
		if !slices.Contains(doc, c) {
			t.Errorf("doc.go's # Commands does not list %q: add an entry that begins with it", c)
		}
	}
	for _, c := range doc {
		if !slices.Contains(tree, c) {
			t.Errorf("doc.go's # Commands lists %q, which is not a command", c)
		}
	}
}
