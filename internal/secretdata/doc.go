// Package secretdata owns the one rule for what of a Kubernetes Secret is
// secret: every value of its data (as stored, base64, and decoded) and of
// its stringData (as written, and base64-encoded), the forms a message
// could echo. The diff's Redactor and the charts package's post-renderer
// messages both withhold what Values returns.
package secretdata
