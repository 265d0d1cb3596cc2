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

// destructiveTest is the one top-level test allowed to call t.Parallel
// itself: see TestDestructiveFaults (destructive_test.go).
const destructiveTest = "TestDestructiveFaults"

// shareHelper is how every other test runs in parallel (share_test.go).
const shareHelper = "shareCluster"

// TestParallelTestsShareTheCluster checks what running the destructive
// fault scenarios last and alone rests on:
//   - TestDestructiveFaults calls t.Parallel in its own body;
//   - no other top-level test does: a test runs in parallel only through
//     shareCluster, which counts it before any test runs in parallel and
//     holds the cluster shared, so that the destructive scenarios wait for
//     it;
//   - shareCluster is the first statement of the tests that call it.
//
// Parallel subtests are fine: their parent test waits for them.
func TestParallelTestsShareTheCluster(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found, shared := false, 0
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
				t.Errorf("%s (%s) calls t.Parallel: it would run alongside %s, which stops etcd and restarts the kube-apiserver; call %s(t) instead, or run its cases as parallel subtests", fd.Name.Name, fset.Position(fd.Pos()), destructiveTest, shareHelper)
			}
			for i, st := range fd.Body.List {
				if !callsShare(st) {
					continue
				}
				shared++
				if i != 0 {
					t.Errorf("%s (%s) calls %s after other statements: it must come first, so that the test is counted before any test runs in parallel", fd.Name.Name, fset.Position(st.Pos()), shareHelper)
				}
			}
		}
	}
	if !found {
		wd, _ := os.Getwd()
		t.Errorf("no %s among the tests of %s", destructiveTest, wd)
	}
	if shared == 0 {
		t.Errorf("no test calls %s: the e2e suite runs one test at a time", shareHelper)
	}
}

// callsShare reports whether the statement st is a call of shareCluster.
func callsShare(st ast.Stmt) bool {
	es, ok := st.(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := es.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	id, ok := call.Fun.(*ast.Ident)
	return ok && id.Name == shareHelper
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
