// Package termouttest holds what the tests of the sanitiser and of its
// callers share: a hostile log and the check that a text is safe to print.
// Only tests import it.
package termouttest
