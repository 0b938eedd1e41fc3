package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envPrefix begins the name of every environment variable that stands for a
// flag: SPENT_ + the flag's name in upper case, with - as _.
const envPrefix = "SPENT_"

// envName returns the environment variable that stands for the flag name:
// "tls-client-ca" is SPENT_TLS_CLIENT_CA.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// envRefused names the flags that have no environment variable, with why: a
// variable set for one of them is refused rather than ignored.
var envRefused = map[string]string{
	"new-fence": "--new-fence is for one deliberate start of a data directory, and a variable left set would refuse every later start: unset it and pass --new-fence on that one start",
}

// envFlags makes c take each of its flags named in only (every flag when
// only is empty; never --help) from the environment when the command line
// leaves it unset: a variable set to a non-empty value is given to the
// flag's own parser (pflag's Set), which marks the flag as changed, so that
// it counts as given on the command line and overrides the configuration
// file. Precedence is therefore flags, then environment, then file, then
// defaults. A value the flag refuses is a usage error naming the variable;
// a usage error of c's RunE names the variables that set flags, since one
// of them may be its cause. Each flag's help shows its variable.
func (m *Main) envFlags(c *cobra.Command, only ...string) *cobra.Command {
	takes := func(f *pflag.Flag) bool {
		return f.Name != "help" && (len(only) == 0 || slices.Contains(only, f.Name))
	}
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if _, refused := envRefused[f.Name]; takes(f) && !refused {
			f.Usage += " [$" + envName(f.Name) + "]"
		}
	})
	var used []string
	pre := c.PreRunE
	c.PreRunE = func(c *cobra.Command, args []string) error {
		used = nil
		var err error
		c.Flags().VisitAll(func(f *pflag.Flag) {
			name := envName(f.Name)
			v := m.getenv(name)
			if err != nil || f.Changed || !takes(f) || v == "" {
				return
			}
			if why, refused := envRefused[f.Name]; refused {
				err = usagef("%s is set: %s", name, why)
				return
			}
			if serr := c.Flags().Set(f.Name, v); serr != nil {
				err = usagef("%s: bad value for --%s: %w (fix or unset the variable; see spent help environment)", name, f.Name, serr)
				return
			}
			used = append(used, name)
		})
		if err != nil || pre == nil {
			return err
		}
		return pre(c, args)
	}
	if run := c.RunE; run != nil {
		c.RunE = func(c *cobra.Command, args []string) error {
			err := run(c, args)
			var ue *usageError
			if len(used) > 0 && errors.As(err, &ue) {
				return usagef("%w (flags set from the environment: %s)", err, strings.Join(used, ", "))
			}
			return err
		}
	}
	return c
}

// environmentTopic returns the help topic "spent help environment", made
// from the flags of serve: the variables, the flags they stand for and
// what they do, and the client commands' variables.
func environmentTopic(serve *cobra.Command) *cobra.Command {
	var b strings.Builder
	b.WriteString(`Every flag of "spent serve" can also be set from the environment, in a
variable named SPENT_ + the flag's name in upper case with - as _. A flag on
the command line wins over its variable, a variable over the configuration
file, and the file over the defaults. An empty variable counts as unset; a
value the flag would refuse is refused, naming the variable. "spent epoch
retire" reads SPENT_CONFIG, SPENT_DATA and SPENT_STORE the same way, so that
it finds the server's data directory and store.

`)
	serve.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		name, usage := pflag.UnquoteUsage(f)
		usage = strings.TrimSuffix(usage, " [$"+envName(f.Name)+"]")
		if why, refused := envRefused[f.Name]; refused {
			fmt.Fprintf(&b, "  (none) for --%s: %s\n", f.Name, why)
			return
		}
		if name != "" {
			name = " " + name
		}
		fmt.Fprintf(&b, "  %s for --%s%s\n      %s\n", envName(f.Name), f.Name, name, usage)
	})
	b.WriteString(`
The client commands read SPENT_ADDR (--addr) and SPENT_TOKEN (--token);
serve reads SPENT_KEK (the key-encryption key of the issuing keys) and the
variables the configuration file's token_env names; "spent token" reads
SPENT_ATTESTER_TOKEN and "spent wallet" SPENT_WALLET. See
docs/configuration.md.`)
	return &cobra.Command{
		Use:   "environment",
		Short: "The environment variables spent reads",
		Long:  b.String(),
	}
}
