package render
