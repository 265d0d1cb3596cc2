package vllm

import (
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Command is a container's command line as the vLLM server it starts
// reads it: command then args, $(VAR) references expanded from the
// container's literal env as the kubelet does, and the script of `sh -c`
// split into words.
type Command struct {
	// Argv is the command line, expanded and split.
	Argv []string
	// Flags and Model are Args(Argv): --model wins over the positional
	// model of `vllm serve`.
	Flags map[string]string
	Model string
	// Server says the command line starts a vLLM OpenAI server: `vllm
	// serve`, the OpenAI API server module, or (no command: the image's
	// entrypoint) a --model flag, as the built-in chart and the
	// vllm/vllm-openai images do.
	Server bool
}

// ContainerCommand reads container c's command line (see Command). It is
// the one reader of a rendered or running container's vLLM settings: the
// model-fit preflight and the failure classifier's hints take them from
// here, so both quote what the pod runs with whatever chart made it.
func ContainerCommand(c *corev1.Container) Command {
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	var argv []string
	for _, a := range append(append([]string(nil), c.Command...), c.Args...) {
		argv = append(argv, Expand(a, env))
	}
	argv = splitScripts(argv)
	cmd := Command{Argv: argv, Server: runsServer(argv, len(c.Command) == 0)}
	cmd.Flags, cmd.Model = Args(argv)
	if m := cmd.Flags["model"]; m != "" {
		cmd.Model = m
	}
	return cmd
}

// runsServer reports whether argv starts a vLLM OpenAI server.
func runsServer(argv []string, entrypoint bool) bool {
	for i, a := range argv {
		base := a[strings.LastIndex(a, "/")+1:]
		if base == "vllm" && i+1 < len(argv) && argv[i+1] == "serve" {
			return true
		}
		if strings.Contains(a, "vllm.entrypoints.openai.api_server") || strings.Contains(a, "vllm.entrypoints.api_server") {
			return true
		}
	}
	if entrypoint {
		for _, a := range argv {
			if a == "--model" || strings.HasPrefix(a, "--model=") {
				return true
			}
		}
	}
	return false
}

// Expand replaces $(VAR) as the kubelet does ($$ escapes), and $VAR and
// ${VAR} of shell scripts, from env; unknown references stay.
func Expand(s string, env map[string]string) string {
	s = os.Expand(strings.ReplaceAll(s, "$$", "\x00"), func(name string) string {
		if v, ok := env[name]; ok {
			return v
		}
		return "${" + name + "}"
	})
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '$' && i+1 < len(s) && s[i+1] == '(' {
			if end := strings.IndexByte(s[i:], ')'); end > 0 {
				if v, ok := env[s[i+2:i+end]]; ok {
					b.WriteString(v)
					i += end
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return strings.ReplaceAll(b.String(), "\x00", "$")
}

// splitScripts replaces the script of `sh -c SCRIPT` (bash, /bin/sh) by
// its words, quotes removed: enough to find vLLM's flags in it.
func splitScripts(argv []string) []string {
	var out []string
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		base := a[strings.LastIndex(a, "/")+1:]
		if (base == "sh" || base == "bash") && i+2 < len(argv) && argv[i+1] == "-c" {
			out = append(out, shellWords(argv[i+2])...)
			out = append(out, argv[i+3:]...)
			return out
		}
		out = append(out, a)
	}
	return out
}

// shellWords splits a script into words at blanks, ';', '&', '|' and
// newlines, honouring single and double quotes and backslash-newline.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	in := false
	var quote byte
	flush := func() {
		if in {
			words = append(words, cur.String())
			cur.Reset()
			in = false
		}
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			} else {
				cur.WriteByte(ch)
			}
		case ch == '\'' || ch == '"':
			quote, in = ch, true
		case ch == '\\' && i+1 < len(s) && s[i+1] == '\n':
			i++
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == ';' || ch == '&' || ch == '|':
			flush()
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	flush()
	return words
}
