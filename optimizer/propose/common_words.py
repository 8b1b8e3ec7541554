"""Everyday English words of five or more letters that never count as eval-set literals.

The eval-literal guard flags distinctive words a proposer copies from task inputs into the
prompt. A word on this list is too ordinary to be evidence of copying, so a general rule
("If the input is only a greeting ...") passes even when a task happens to use the same word.
Inflections are handled by `optimizer.propose.literals`, so mostly base forms are listed.
"""

from __future__ import annotations

_WORDS = """
about above absent accept access account across action active actual actually adapt added
address adult advance advice affect afraid after afternoon again against agent agree ahead
alarm album alert alive allow almost alone along already alright also although always amazing
among amount angry animal annual another answer anxious anybody anymore anyone anything anyway
anywhere apart apartment apple apply appointment approach april arrive article artist aside
asleep attach attempt attend attention audio august author autumn available avoid awake award
aware awesome awful
baby backup badly balance banana basic basket bathroom battery beach beautiful because become
bedroom before begin behind being believe below beside best better between beyond bicycle
birthday black blank blanket block blood board boring borrow bottle bottom brain bread break
breakfast brief bright bring broken brother brown brush budget build building bunch burger
business busy butter button buyer
cable cafe calendar calls camera cancel capital caption careful carry cases catch cause
celebrate center central certain chain chair challenge chance change chapter charge cheap check
cheese chicken child children choice choose chores church cinema citizen class classic clean
clear clever client climb clock close closet cloth clothes cloud coach coffee cold collect
colour color combine comfort comment common company compare complete computer concert confirm
connect consider contact contain content context continue control convert cook cookie cooking
corner correct cost could count country couple course cousin cover crazy cream create credit
cross crowd culture current customer cycle
daily damage dance danger dark daughter dead dealer dear death decide decision deep default
delete deliver dentist depend describe design detail develop device diary dinner direct
dirty discuss dishes doctor document dollar double doubt dozen draft drama drawer dream dress
drink drive driver early earth easily easter eaten either elder email empty ended energy
engine enjoy enough entire entry equal error escape evening event every everybody everyone
everything everywhere exact exactly exam example excited exciting excuse exercise expect
expense expensive experience explain extra
facts fairly false family famous fancy farmer father favorite favourite feature february
feeling fellow fever field fight figure filler final finally finance find finger finish first
fitness fixed flight floor flower focus folder follow food foods force foreign forest forget
forgot formal forward found frame free fresh friday friend friendly front fruit full funny
future
game garage garden general gently getting gift given glass going goods grade grand grandma
grandpa grass great green greeting greetings group grown guess guest guide guitar gym
habit haircut half happen happy hardly health healthy heard heart heavy hello helpful hidden
higher highly history hobby holiday honest hope horse hospital hotel hours house however huge
human hundred hungry hurry husband
ideas image imagine important include income indeed inside instead interest internet invite
issue items itself
january jacket journal journey judge juice july jumped june
keeps kettle kids kitchen knife knowledge known
label large later laugh laundry layer leader learn least leave left lemon length lesson
letter level library light likely limit linked listen little lives local lonely longer lovely
lower lucky lunch
machine magazine major maker manage manager march market married matter maybe meal meaning
measure medical medicine meeting member memory message metal method middle might minor minute
minutes mirror missing mistake mobile model modern moment monday money month months morning
mother motion mountain mouse movie music myself
nature nearby nearly needed neighbor neighbour never night noise normal north note notes
nothing notice novel number nurse
ocean october offer office often okay older online only opening option orange order other
others outside owner
package paint paper parent parents party pass passed past pasta pattern payment peace people
pepper perfect perhaps period person personal phone photo photos piano picture piece place plan
plane planet plans plant plate please plenty pocket point police polite poor popular possible
post potato pound power practice prepare present press pretty price print private probably
problem process product program project promise proper proud public pull purpose purse push
quality quarter question quick quickly quiet quite
radio rain random range rather reach read reading ready real really reason receipt recent
recipe record reduce refund region regular relax remember remind reminder remove rent repair
repeat reply report request respond rest result return review rice rich right river road room
round route routine ruler running
saturday salad salary salt same sample sandwich sauce saved saving scene schedule school
science score screen search season second secret section seems seller send sense sentence
september serious service session seven several shape share sharp sheet shelf shift shirt shoes
shop shopping short should shoulder shower sick side sign signal silly simple since single
sister sitting skill sleep slept slightly slow small smart smell smile snack social socks
soft software solid solve someone something sometimes somewhere song soon sorry sound soup
source south space speak special speech speed spend spent spoke sport spring square staff stage
stairs stand start state station stay steady still stomach stone stop store storm story
straight strange street stress strong student study stuff style subject success sugar suggest
summer sunday super supper support suppose sure surprise sweet swim system
table taken talk taste teacher team teeth television tell tennis terrible test thank thanks
theatre theater their them theme then there these thing things think third thirsty those
though thought three through thursday ticket tidy time tired title today together toilet
tomorrow tonight topic total touch toward towel tower town track traffic train travel treat
trees trip trouble truck true trust truth try tuesday turn twelve twenty twice
uncle under understand until upon upset upstairs urgent usual usually
vacation valid value various video visit voice
wait waiter walk wall wallet want warm wash watch water weather wedding wednesday week weekend
weekly weight welcome well west whatever wheel where whether which while white whole whose
window winter wish within without woman women wonder wonderful word words work worker working
world worried worry would write writing written wrong
yellow yesterday young yours yourself
able back bake ball band bank bath bear beat bike bill bird boat body book boss bowl brew bus
cake call card care cash chat chip city club coat code cool copy cost date deal desk diet dish
door draw drop duty east easy edit exit face fact fail fair farm fast fear feel file film fine
fire fish flat fold fond form fuel gain gate gear gold golf hair hall hand hang hard hate head
heat help hike hill hold home hour idea item join jump keep kind king know lake lamp land last
late lazy lead lend life lift like line list load lock long look lose loss loud love luck mail
main make mark mate meet menu mild milk mind miss mood move name near neck need news nice nose
open pack page pain pair park part pay pick pill pink play plus pool pork rate rest ride ring
rise risk road rock roof rule safe sale salt save seat seem sell ship shop show shut sing site
size skip slow snow sock sofa song sort spot star step stop sure swap take task taxi team tea
text tidy tiny tour town tree type unit view vote wake want wash wave wear wife wild wind wine
wise wood work yard year zone
project projects milestone relationship knowledge emotion visual audio areas resources archives
inbox english spanish french german italian portuguese chinese japanese korean dutch polish
russian arabic hindi greek turkish swedish danish norwegian finnish europe european america
american asia asian africa african british internet google apple android iphone whatsapp
christmas easter monday tuesday wednesday thursday friday saturday sunday january february
april august september october november december morning
http https html www presentation passport approved persist untitled lease grant quiz cabin
meeting meetings review list lines section sections overview results methods literature
"""

COMMON_WORDS: frozenset[str] = frozenset(_WORDS.split())
"""Lower-case base forms. Short words are listed too: inflections ("booked") reduce to them."""

STOPWORDS: frozenset[str] = frozenset("""
a an the and or but if of to in on at by for from with without into onto over under about as
is are was were be been being am do does did done have has had having i me my mine we us our
you your he him his she her it its they them their this that these those there here then than
so not no nor too very just only also all any some each every one s t can could will would
shall should may might must what which who whom whose when where why how up down out off again
""".split())
"""Function words: a phrase needs at least two words outside this list to be distinctive."""
