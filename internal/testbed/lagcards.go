package testbed

import (
	"fmt"

	"github.com/vflag/vflag/internal/cfgdecode"
)

// LAGCardsOver lists the simulated NICs of a config (its sim: section)
// whose sriov_totalvfs is above limit while a switchdev group names one of
// their PFs, as "nic0 (total_vfs 127)": a card mlx5 never puts in VF-LAG
// when limit is eswitch.LAGMaxTotalVFs. Example, test and bench configs
// hold their switchdev cards to it.
func LAGCardsOver(cfg string, limit int) ([]string, error) {
	raw, err := cfgdecode.YAML([]byte(cfg))
	if err != nil {
		return nil, err
	}
	switchdevPF := map[string]bool{}
	groups, _ := raw["groups"].([]any)
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		if mode, ok := gm["eswitch"].(string); ok && mode != "switchdev" {
			continue // eswitch defaults to switchdev
		}
		pfs, _ := gm["pfs"].([]any)
		for _, p := range pfs {
			switchdevPF[fmt.Sprint(p)] = true
		}
	}
	simRaw, _ := raw["sim"].(map[string]any)
	nics, _ := simRaw["nics"].([]any)
	var over []string
	for _, n := range nics {
		nm, _ := n.(map[string]any)
		total := 8 // the simulator's default
		if v, ok := nm["total_vfs"].(int); ok {
			total = v
		}
		pfs, _ := nm["pfs"].([]any)
		for _, p := range pfs {
			pm, _ := p.(map[string]any)
			if (switchdevPF[fmt.Sprint(pm["netdev"])] || switchdevPF[fmt.Sprint(pm["pci"])]) && total > limit {
				over = append(over, fmt.Sprintf("%v (total_vfs %d)", nm["name"], total))
				break
			}
		}
	}
	return over, nil
}
