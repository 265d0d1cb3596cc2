package e2e

// This file has no build tag: it needs no cluster, and runs with the unit
// tests as well as with the e2e tests.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// destructiveTest is the one top-level test allowed to call t.Parallel:
// see TestDestructiveFaults (destructive_test.go).
const destructiveTest = "TestDestructiveFaults"

// TestOnlyDestructiveFaultsRunParallel checks what running the destructive
// fault scenarios last rests on: TestDestructiveFaults calls t.Parallel in
// its own body, and no other top-level test of the package does (that one
// would run alongside the destructive scenarios). Parallel subtests are
// fine: their parent test waits for them.
func TestOnlyDestructiveFaultsRunParallel(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := false
	for _, name := range files {
		// Build tags do not matter here: every file of the package counts.
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || fd.Body == nil || !strings.HasPrefix(fd.Name.Name, "Test") {
				continue
			}
			parallel := callsParallel(fd)
			switch {
			case fd.Name.Name == destructiveTest:
				found = true
				if !parallel {
					t.Errorf("%s (%s) does not call t.Parallel in its body: the destructive fault scenarios would not run last", destructiveTest, fset.Position(fd.Pos()))
				}
			case parallel:
				t.Errorf("%s (%s) calls t.Parallel: it would run alongside %s, which stops etcd and restarts the kube-apiserver; run its cases as parallel subtests instead", fd.Name.Name, fset.Position(fd.Pos()), destructiveTest)
			}
		}
	}
	if !found {
		wd, _ := os.Getwd()
		t.Errorf("no %s among the tests of %s", destructiveTest, wd)
	}
}

// callsParallel reports whether the test fd calls Parallel on its
// *testing.T in its own body (not in a subtest's function).
func callsParallel(fd *ast.FuncDecl) bool {
	params := fd.Type.Params.List
	if len(params) != 1 || len(params[0].Names) != 1 {
		return false
	}
	tname := params[0].Names[0].Name
	parallel := false
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false // a subtest, or another function
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Parallel" {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == tname {
				parallel = true
			}
		}
		return true
	})
	return parallel
}
