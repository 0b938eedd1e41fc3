package main_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// tourStep is one step of the README's tour: a shell command with the
// answer the README shows for it, a (re)start of the server, or a file to
// write.
type tourStep struct {
	line    int      // in README.md
	command string   // a shell command, or a go run ./cmd/spent serve line
	want    []string // the lines of its answer, … standing for anything
	file    string   // the toml block to write to spent.toml, when set
}

// tourSteps reads the tour of README.md: the section "A five-minute tour",
// its ```sh blocks (the "# " lines after a command are its answer), the
// ```json or bare ``` block right after one (the answer of its last
// command), and its ```toml block (spent.toml).
func tourSteps(t *testing.T) []tourStep {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var steps []tourStep
	in := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "## ") {
			if in {
				break
			}
			in = l == "## A five-minute tour"
			continue
		}
		if !in || !strings.HasPrefix(l, "```") {
			continue
		}
		lang, start := strings.TrimPrefix(l, "```"), i+1
		for i++; i < len(lines) && lines[i] != "```"; i++ {
		}
		block := lines[start:i]
		switch lang {
		case "sh":
			for j := 0; j < len(block); j++ {
				if strings.HasPrefix(block[j], "# ") {
					t.Fatalf("README.md:%d: an answer before any command", start+j+1)
				}
				st := tourStep{line: start + j + 1, command: block[j]}
				for strings.HasSuffix(block[j], `\`) && j+1 < len(block) {
					j++
					st.command += "\n" + block[j]
				}
				for j+1 < len(block) && strings.HasPrefix(block[j+1], "# ") {
					j++
					st.want = append(st.want, strings.TrimPrefix(block[j], "# "))
				}
				steps = append(steps, st)
			}
		case "json", "":
			if len(steps) == 0 || steps[len(steps)-1].want != nil {
				t.Fatalf("README.md:%d: an answer block that follows no command, or a command already answered", start)
			}
			steps[len(steps)-1].want = block
		case "toml":
			steps = append(steps, tourStep{line: start, file: strings.Join(block, "\n") + "\n"})
		default:
			t.Fatalf("README.md:%d: a ```%s block in the tour: the test does not know what to do with it", start, lang)
		}
	}
	if len(steps) < 10 {
		t.Fatalf("found %d steps in the README's tour: the test reads it wrong", len(steps))
	}
	return steps
}

// answerPattern turns a README answer line into a pattern: … matches
// anything, the rest itself.
func answerPattern(line string) *regexp.Regexp {
	parts := strings.Split(line, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

// matchAnswer reports whether the lines of want match lines of got in
// order (a line of got may be skipped: headers and metric lines the README
// leaves out).
func matchAnswer(got string, want []string) bool {
	lines := strings.Split(strings.ReplaceAll(got, "\r", ""), "\n")
	i := 0
	for _, l := range lines {
		if i < len(want) && answerPattern(want[i]).MatchString(l) {
			i++
		}
	}
	return i == len(want)
}

// startTourServer runs the README's serve line (go run ./cmd/spent serve
// ...) with the built binary in dir, on a free loopback port, and returns
// the port.
func startTourServer(t *testing.T, dir, line string) (*Proc, string) {
	t.Helper()
	args := strings.Fields(strings.TrimPrefix(line, "go run ./cmd/spent serve"))
	if i := slices.Index(args, "#"); i >= 0 {
		args = args[:i]
	}
	p := StartBinaryIn(t, dir, nil, args...)
	port, ok := strings.CutPrefix(p.Addr, "http://127.0.0.1:")
	if !ok {
		t.Fatalf("%s: listening on %s, want 127.0.0.1", line, p.Addr)
	}
	return p, port
}

// TestReadmeTour runs the README's tour as written, command by command,
// against a fresh server built from the tree, and checks every answer it
// shows. The only changes are the address (a free port for localhost:7070)
// and the binary (the one built for go run ./cmd/spent).
func TestReadmeTour(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("the README's tour needs %s: %v", tool, err)
			}
			t.Skipf("the README's tour needs %s (Debian package %s): %v", tool, tool, err)
		}
	}
	steps := tourSteps(t)
	bin := SpentBinary(t)
	dir := t.TempDir()
	var srv *Proc
	var port string
	for _, st := range steps {
		switch {
		case st.file != "":
			if err := os.WriteFile(filepath.Join(dir, "spent.toml"), []byte(st.file), 0o600); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(st.command, "go run ./cmd/spent serve"):
			if srv != nil {
				srv.Stop()
			}
			srv, port = startTourServer(t, dir, st.command)
		default:
			if srv == nil {
				t.Fatalf("README.md:%d: a command before the server is started", st.line)
			}
			got := runTourCommand(t, bin, dir, port, st)
			if st.want == nil && got != "" {
				t.Errorf("README.md:%d: %s\ngot %q, and the README shows no answer", st.line, st.command, got)
			}
			if !matchAnswer(got, st.want) {
				t.Errorf("README.md:%d: %s\ngot:\n%s\nwant (… for anything):\n%s", st.line, st.command, got, strings.Join(st.want, "\n"))
			}
		}
	}
}

// tourShell runs one command of the tour ($TOUR_COMMAND) in bash, with the
// shell variables the commands before it set (kept in .tour-vars), as one
// terminal would.
const tourShell = `[ -f .tour-vars ] && . ./.tour-vars
tour_before=" $(compgen -v | tr '\n' ' ') "
eval "$TOUR_COMMAND"
tour_status=$?
for tour_v in $(compgen -v); do
	case "$tour_before" in *" $tour_v "*) ;; *) [ "${tour_v#tour_}" = "$tour_v" ] && declare -p "$tour_v" ;; esac
done >> .tour-vars
exit $tour_status
`

// runTourCommand runs one command of the tour in dir and returns what it
// printed; it fails the test unless the command exits 0.
func runTourCommand(t *testing.T, bin, dir, port string, st tourStep) string {
	t.Helper()
	command := strings.ReplaceAll(st.command, "localhost:7070", "localhost:"+port)
	command = strings.ReplaceAll(command, "go run ./cmd/spent", bin)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", tourShell)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TOUR_COMMAND="+command, "SPENT_ADDR=http://127.0.0.1:"+port)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("README.md:%d: %s\n%v; stdout %q; stderr %q", st.line, st.command, err, out, stderr)
	}
	return strings.TrimSuffix(string(out), "\n")
}
