package main

import (
	"context"
	"fmt"

	"github.com/skip2/go-qrcode"
	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
)

// newConsoleCmd is `warren console`: pair a browser with the web console
// (SPEC 14), or end every session.
func newConsoleCmd(c *cli) *cobra.Command {
	var revoke, noQR bool
	cmd := &cobra.Command{
		Use:   "console [--revoke] [--no-qr]",
		Short: "print a one-time link (and a QR code) that pairs a browser with the web console; --revoke ends every session",
		Long: `Print a link that pairs one browser with the daemon's web console, and the
same link as a QR code for a phone. The link works once, within 5 minutes;
opening it sets a session cookie (HttpOnly, SameSite=Strict) that lasts 30
days or until warren console --revoke. The console listens where the
daemon was told: warren daemon start --http 127.0.0.1:7777, or "http":
{"listen": ...} in config.json (an address other than loopback needs TLS,
or "plain_http": true on a private network).`,
		Example: indent("warren daemon start --http 127.0.0.1:7777\nwarren console\nwarren console --revoke"),
		Args:    usage.Args(0, 0),
		RunE: c.runE(func(ctx context.Context, _ *cobra.Command, _ []string) error {
			if revoke {
				res, show, err := c.callOut(ctx, "console.revoke", nil)
				if err == nil && show {
					fmt.Fprintf(c.stdout, "revoked %d session(s); pair again with warren console\n", reply.Num(res, "revoked"))
				}
				return err
			}
			res, show, err := c.callOut(ctx, "console.pair", nil)
			if err != nil || !show {
				return err
			}
			url := reply.Str(res, "url")
			fmt.Fprintf(c.stdout, "Open this link once, before %s (it pairs one browser):\n\n  %s\n\n", reply.Str(res, "expires"), url)
			if !noQR {
				if q, err := qrcode.New(url, qrcode.Medium); err == nil {
					fmt.Fprint(c.stdout, q.ToSmallString(false))
				}
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&revoke, "revoke", false, "end every console session (paired browsers must pair again)")
	cmd.Flags().BoolVar(&noQR, "no-qr", false, "print the link only")
	return cmd
}
