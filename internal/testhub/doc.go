// Package testhub is a local stand-in for the Hugging Face Hub's resolve
// API (GET /{repo}/resolve/{revision}/{file}) for the model-fit tests:
// it serves config.json files from a directory (file name: the repo id
// with "/" written "--"), an optional checkpoint index, and answers 401 to
// requests for a gated repo that carry no or a wrong bearer token. Only
// tests import it.
package testhub
