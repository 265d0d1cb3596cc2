// Package owner owns the keys that mark a live object as a release's and
// the one rule that reads them (contract: "Ownership"). Every object
// vllmctl applies carries the label app.kubernetes.io/managed-by=vllmctl,
// the label vllmctl.io/release=<release> and the annotation
// vllmctl.io/release-namespace=<namespace>; every other label, among them
// app.kubernetes.io/instance, is left as the chart renders it.
//
// Objects of releases deployed before these keys carry
// app.kubernetes.io/instance=<release> (and managed-by) instead: they are
// still their release's, and move to the new keys on its next deploy,
// since server-side apply drops the instance label the old render set
// when the new one no longer sets it.
package owner
