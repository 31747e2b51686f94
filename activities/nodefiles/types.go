package nodefiles
