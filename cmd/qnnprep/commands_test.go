package main

import (
	"slices"
	"strings"
	"testing"
)

// TestCommandTable: help lists the commands by name, and a name appears
// once, so "qnnprep NAME" always reaches the command help lists.
func TestCommandTable(t *testing.T) {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.Name
		if c.Run == nil || c.Usage == "" || c.Summary == "" {
			t.Errorf("%s: want Run, Usage and Summary", c.Name)
		}
		if lookup(c.Name) != c {
			t.Errorf("lookup(%q) does not return its command", c.Name)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("commands not in name order: %s", strings.Join(names, " "))
	}
	if len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("a command name appears twice: %s", strings.Join(names, " "))
	}
	if lookup("nosuch") != nil {
		t.Error(`lookup("nosuch") found a command`)
	}
}
