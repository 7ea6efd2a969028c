package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// envPrefix starts the name of every environment variable weft reads.
const envPrefix = "WEFT_"

// envName is the variable that sets flag name: WEFT_ and the name upper-cased
// with '-' turned into '_' (--auth-token: WEFT_AUTH_TOKEN).
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseWithEnv parses args into fs, then sets every flag of fs that args did
// not give from its environment variable (envName), read through lookup
// (os.LookupEnv in main). A flag on the command line wins over the
// environment; the environment wins over the default. It covers every flag
// defined on fs, so a flag added later needs no change here. fs's usage lists
// each flag's variable. A value the flag refuses is an error naming the
// variable.
func parseWithEnv(fs *flag.FlagSet, args []string, lookup func(string) (string, bool)) error {
	fs.Usage = func() { envUsage(fs, fs.Output()) }
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] {
			return
		}
		name := envName(f.Name)
		v, ok := lookup(name)
		if !ok {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("environment %s=%q (--%s): %w", name, v, f.Name, e)
		}
	})
	return err
}

// envUsage prints fs's flags with their defaults, each followed by the
// environment variable that also sets it.
func envUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage of weft %s:\n", fs.Name())
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if typ != "" {
			line += " " + typ
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "\n    \tenvironment: %s\n", envName(f.Name))
	})
	fmt.Fprintf(w, "\nA flag on the command line wins over its environment variable.\n")
}
