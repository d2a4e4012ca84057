//go:build purego

package int8

const puregoBuild = true
