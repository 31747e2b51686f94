package pki
