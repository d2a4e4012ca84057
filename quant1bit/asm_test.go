//go:build !purego

package quant1bit

const puregoBuild = false
