package cli

// AllTargets are bench all's patterns of the target cases.
var AllTargets = allTargets
