package pkihost
