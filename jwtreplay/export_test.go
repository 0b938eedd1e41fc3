package jwtreplay

// ProblemTitles maps every code to its title. For tests.
var ProblemTitles = problemTitles
