package agentinstall

import (
	"os"
	"regexp"
	"testing"
)

// TestAgentPinsMatchTheE2EScript: the versions `warren agents install`
// pins are those scripts/e2e-install.sh installs for the e2e tests.
func TestAgentPinsMatchTheE2EScript(t *testing.T) {
	data, err := os.ReadFile("../../../../scripts/e2e-install.sh")
	if err != nil {
		t.Fatal(err)
	}
	pinned := map[string]bool{}
	for _, m := range regexp.MustCompile(`\[[a-z-]+\]="([^"]+@[0-9][^"]*)"`).FindAllStringSubmatch(string(data), -1) {
		pinned[m[1]] = true
	}
	for name, p := range agentPackages() {
		if !pinned[p.spec] {
			t.Errorf("agents install %s pins %s; scripts/e2e-install.sh pins none such (%v)", name, p.spec, pinned)
		}
	}
}
